package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/bridge"
)

// maxKeyLen bounds the key material the lookup form takes.
const maxKeyLen = 1024

// ServeHTTP serves the page (GET; JSON with ?format=json or an Accept of
// application/json), a key lookup (GET with rule and key), and a Reset
// (POST with rule, key and the page's CSRF token), to the requests
// Config.Authorize lets through. See docs/admin.md.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	who, ok := h.cfg.Authorize(r)
	if !ok {
		hd.Set("WWW-Authenticate", `Basic realm="redlimit admin", charset="UTF-8"`)
		http.Error(w, "redlimit admin: not authorized", http.StatusUnauthorized)
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.get(w, r, who)
	case http.MethodPost:
		if err := h.cop.Check(r); err != nil {
			http.Error(w, "redlimit admin: cross-origin request refused: "+err.Error(), http.StatusForbidden)
			return
		}
		h.post(w, r, who)
	default:
		hd.Set("Allow", "GET, HEAD, POST")
		http.Error(w, "redlimit admin: method not allowed", http.StatusMethodNotAllowed)
	}
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request, who string) {
	q := r.URL.Query()
	v := h.view(who, !wantsJSON(r))
	if n, err := strconv.Atoi(q.Get("refresh")); err == nil && n > 0 {
		v.Refresh = max(n, 2)
	}
	status := http.StatusOK
	if q.Has("rule") || q.Has("key") {
		v.Form = formView{Rule: q.Get("rule"), Key: q.Get("key"), Tier: q.Get("tier")}
		lv, err := h.lookup(r.Context(), v.Form)
		if err != nil {
			status = http.StatusBadRequest
			v.Error = err.Error()
		}
		v.Lookup = lv
	}
	h.respond(w, r, status, v)
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request, who string) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "redlimit admin: bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !h.validCSRF(who, r.PostForm.Get("csrf")) {
		http.Error(w, "redlimit admin: missing or stale CSRF token: reload the page and try again", http.StatusForbidden)
		return
	}
	v := h.view(who, !wantsJSON(r))
	v.Form = formView{Rule: r.PostForm.Get("rule"), Key: r.PostForm.Get("key"), Tier: r.PostForm.Get("tier")}
	if r.PostForm.Get("action") != "reset" {
		v.Error = "unknown action " + strconv.Quote(r.PostForm.Get("action")) + ": the only one is reset"
		h.respond(w, r, http.StatusBadRequest, v)
		return
	}
	s, st, material, err := h.parseLookup(v.Form)
	if err != nil {
		v.Error = err.Error()
		h.respond(w, r, http.StatusBadRequest, v)
		return
	}
	// this rule's key alone: the others have no Input
	err = resetInputs(st.eng, r.Context(), []redlimit.Input{{Rule: st.rule.Name, Material: material}})
	attrs := []slog.Attr{slog.String("who", who), slog.String("source", s.name), slog.String("rule", st.rule.Name),
		slog.String("key", material), slog.String("remote", r.RemoteAddr)}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, slog.Any("err", err))
	}
	h.cfg.Logger.LogAttrs(r.Context(), level, "redlimit admin: key reset", attrs...)
	status := http.StatusOK
	if err != nil {
		status = http.StatusBadGateway
		v.Error = "reset failed: " + err.Error()
	} else {
		v.Message = "Reset " + s.name + "/" + st.rule.Name + " key " + strconv.Quote(material) + " (by " + who + "): every instance sees the key at full capacity; other instances' deny caches may still deny it until their cached RetryAfter ends."
	}
	v.Lookup, _ = h.lookup(r.Context(), v.Form)
	if v.Lookup != nil {
		v.Lookup.Reset = err == nil
	}
	h.respond(w, r, status, v)
}

// parseLookup checks the lookup form: a known rule ("source/rule", or
// "rule" when one source has it) and key material.
func (h *Handler) parseLookup(f formView) (*Source, *ruleState, string, error) {
	h.mu.Lock()
	sources := append([]*Source(nil), h.sources...)
	h.mu.Unlock()
	name := strings.TrimSpace(f.Rule)
	if name == "" {
		return nil, nil, "", errors.New("choose a rule")
	}
	var found []*Source
	var st *ruleState
	srcName, ruleName, scoped := strings.Cut(name, "/")
	if !scoped {
		ruleName = srcName
	}
	var all []string
	for _, s := range sources {
		for _, r := range s.rules() {
			all = append(all, s.name+"/"+r.rule.Name)
		}
		if scoped && s.name != srcName {
			continue
		}
		if r := s.rule(ruleName); r != nil {
			found, st = append(found, s), r
		}
	}
	switch {
	case len(all) == 0:
		return nil, nil, "", errNoRules
	case len(found) == 0:
		return nil, nil, "", errors.New("unknown rule " + strconv.Quote(name) + "; the rules are " + strings.Join(all, ", "))
	case len(found) > 1:
		return nil, nil, "", errors.New("rule " + strconv.Quote(name) + " is in several sources: write it as source/rule")
	}
	key := f.Key
	switch {
	case key == "":
		return nil, nil, "", errors.New("the key is empty: type the key material (a client IP, a user ID, ...) of the rule")
	case len(key) > maxKeyLen:
		return nil, nil, "", errors.New("the key is longer than " + strconv.Itoa(maxKeyLen) + " bytes")
	case !utf8.ValidString(key):
		return nil, nil, "", errors.New("the key is not valid UTF-8")
	case strings.ContainsFunc(key, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return nil, nil, "", errors.New("the key contains control characters (a pasted newline?)")
	}
	if f.Tier != "" {
		if _, ok := st.rule.Tiers[f.Tier]; !ok {
			return nil, nil, "", errors.New("rule " + strconv.Quote(st.rule.Name) + " has no tier " + strconv.Quote(f.Tier))
		}
	}
	return found[0], st, key, nil
}

// lookup peeks at a key: its state under one rule, consuming nothing.
func (h *Handler) lookup(ctx context.Context, f formView) (*lookupView, error) {
	s, st, material, err := h.parseLookup(f)
	if err != nil {
		return nil, err
	}
	// this rule alone: the others are exempt
	in := make([]redlimit.Input, 0, len(st.eng.Rules()))
	for _, r := range st.eng.Rules() {
		x := redlimit.Input{Rule: r.Name, Exempt: true}
		if r.Name == st.rule.Name {
			x = redlimit.Input{Rule: r.Name, Material: material, Tier: f.Tier}
		}
		in = append(in, x)
	}
	var d redlimit.Decision
	peekInputs(st.eng, ctx, in, &d)
	rd := &d.Rules[st.pos]
	lv := &lookupView{Source: s.name, Rule: st.rule.Name, Key: material, Tier: f.Tier, StorageKey: rd.Key}
	if !h.cfg.ShowKeys && rd.Key != "" {
		lv.StorageKey = strings.TrimSuffix(rd.Key, materialOf(rd.Key)+"}") + h.display(rd.Key) + "}"
	}
	if lv.StorageKey == "" {
		lv.StorageKey = "(none)"
	}
	if rd.Key != "" {
		lv.Shown = h.display(rd.Key)
	}
	lookupResult(lv, &d, rd)
	return lv, nil
}

func (h *Handler) respond(w http.ResponseWriter, r *http.Request, status int, v *pageView) {
	if wantsJSON(r) {
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(v); err != nil {
			http.Error(w, "redlimit admin: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(buf.Bytes())
		return
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, v); err != nil {
		http.Error(w, "redlimit admin: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// wantsJSON reports whether r asks for JSON: format=json, or an Accept
// header naming application/json before text/html.
func wantsJSON(r *http.Request) bool {
	if f := r.FormValue("format"); f != "" {
		return f == "json"
	}
	a := r.Header.Get("Accept")
	j := strings.Index(a, "application/json")
	hm := strings.Index(a, "text/html")
	return j >= 0 && (hm < 0 || j < hm)
}

// peekInputs and resetInputs peek at and reset the keys of chosen rules of
// a Limiter (see internal/bridge): the page looks up one rule's key.
var (
	peekInputs  = bridge.PeekInputs.(func(*redlimit.Limiter, context.Context, []redlimit.Input, *redlimit.Decision))
	resetInputs = bridge.ResetInputs.(func(*redlimit.Limiter, context.Context, []redlimit.Input) error)
)
