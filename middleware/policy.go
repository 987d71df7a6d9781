package middleware

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/redlimit/redlimit/algorithms"
)

// DefaultDenied answers 429 Too Many Requests. The body is an RFC 9457
// problem (type quota-exceeded from the IETF rate-limit draft) when the
// client accepts application/problem+json, and one line of plain text
// otherwise; both say which rules denied and when to retry.
var DefaultDenied http.Handler = http.HandlerFunc(defaultDenied)

// DefaultError answers the requests refused undecided (redlimit.Decision.Failed):
// 500 Internal Server Error for a programmer error (Decision.Err matches
// [algorithms.ErrInvalidConfig]: a negative cost, an invalid limit; no
// retry can succeed, and a 429 would blame the client for the server's
// bug), and 503 Service Unavailable with Retry-After: 1 otherwise (the
// backend failed: a retry may succeed).
var DefaultError http.Handler = http.HandlerFunc(defaultError)

func defaultError(w http.ResponseWriter, r *http.Request) {
	if d, _ := FromContext(r.Context()); d != nil && errors.Is(d.Err, algorithms.ErrInvalidConfig) {
		http.Error(w, "rate limiter misconfigured", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
}

// Unauthorized answers 401 Unauthorized, for Config.MissingKeyDenied: a
// request that carries no key for a rule whose key is a credential (an API
// key, an authenticated user). The body is an RFC 9457 problem when the
// client accepts application/problem+json, and one line of plain text
// otherwise; both name the rules that found no key. It writes no
// WWW-Authenticate challenge, which only the application can word: wrap it
// to add one,
//
//	http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//		w.Header().Set("WWW-Authenticate", `Bearer realm="api"`)
//		middleware.Unauthorized.ServeHTTP(w, r)
//	})
var Unauthorized http.Handler = http.HandlerFunc(unauthorized)

func unauthorized(w http.ResponseWriter, r *http.Request) {
	var names []string
	if d, _ := FromContext(r.Context()); d != nil {
		for _, rd := range d.Rules {
			if rd.MissingKey && !rd.Shadow {
				names = append(names, rd.Name)
			}
		}
	}
	msg := "unauthorized: no key"
	if len(names) > 0 {
		msg += " for rule " + strings.Join(names, ", ")
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if acceptsProblem(r.Header.Get("Accept")) {
		h.Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"title":"Unauthorized","status":401,"detail":` + strconv.Quote(msg) + "}\n"))
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write([]byte(msg + "\n"))
}

func defaultDenied(w http.ResponseWriter, r *http.Request) {
	d, _ := FromContext(r.Context())
	var names []string
	var wait string
	never := false
	if d != nil {
		for _, rd := range d.Rules {
			if rd.MissingKey || rd.InvalidCost && !rd.Shadow || rd.Evaluated && !rd.Shadow && !rd.Result.Allowed {
				names = append(names, rd.Name)
				never = never || rd.MissingKey || rd.InvalidCost || (!rd.Result.Allowed && rd.Result.RetryAfter == 0)
			}
		}
	}
	if ra := w.Header().Get("Retry-After"); ra != "" {
		wait = ra
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if acceptsProblem(r.Header.Get("Accept")) {
		h.Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusTooManyRequests)
		var b strings.Builder
		b.WriteString(`{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Too Many Requests","status":429`)
		b.WriteString(`,"detail":`)
		b.WriteString(strconv.Quote(detail(names, wait, never)))
		b.WriteString(`,"violated-policies":[`)
		for i, n := range names {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote(n))
		}
		b.WriteString("]}\n")
		w.Write([]byte(b.String()))
		return
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write([]byte(detail(names, wait, never) + "\n"))
}

func detail(names []string, wait string, never bool) string {
	s := "rate limit exceeded"
	if len(names) > 0 {
		s += ": " + strings.Join(names, ", ")
	}
	switch {
	case never:
		s += "; this request can never be allowed (no key, invalid cost, or cost above the limit)"
	case wait != "":
		s += "; retry in " + wait + "s"
	}
	return s
}

// acceptsProblem reports whether an Accept header asks for
// application/problem+json (or any +json / JSON) before text.
func acceptsProblem(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case "application/problem+json", "application/json":
			return true
		case "text/plain", "text/*", "text/html":
			return false
		}
	}
	return false
}
