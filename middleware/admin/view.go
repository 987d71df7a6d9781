package admin

import (
	"html/template"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redlimit/redlimit"
)

// The page's data, rendered as HTML and as JSON (the JSON field names are
// the API: see docs/admin.md).

type pageView struct {
	Time      time.Time      `json:"time"`
	Uptime    float64        `json:"uptime_seconds"`
	Masked    bool           `json:"keys_masked"`
	CSRF      string         `json:"csrf_token"`
	Who       string         `json:"-"`
	TopSince  time.Time      `json:"top_since"` // the heavy hitters count from here
	Sources   []sourceView   `json:"sources"`
	Lookup    *lookupView    `json:"lookup,omitempty"`
	Message   string         `json:"message,omitempty"`
	Error     string         `json:"error,omitempty"`
	Refresh   int            `json:"-"`
	Form      formView       `json:"-"`
	Windows   []string       `json:"-"`
	Counters  []string       `json:"-"`
	RuleNames []ruleNameView `json:"-"`
}

type formView struct{ Rule, Key, Tier string }

type ruleNameView struct{ Value, Label string }

type sourceView struct {
	Name         string        `json:"name"`
	Prefix       string        `json:"prefix"`
	Policy       string        `json:"error_policy"`
	OnFallback   bool          `json:"on_fallback"`
	DenyCache    bool          `json:"deny_cache"`
	DenyKeys     int           `json:"deny_cache_keys"`
	LocalDenials uint64        `json:"local_denials"`
	Stalled      int64         `json:"stalled_calls"`
	LastError    *errorView    `json:"last_error"`
	Latency      []latencyView `json:"latency"`
	Rules        []ruleView    `json:"rules"`
}

type errorView struct {
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

type latencyView struct {
	Window  string  `json:"window"`
	Seconds float64 `json:"seconds"` // the span measured: shorter than Window while the process is younger
	Count   uint64  `json:"count"`
	P50     float64 `json:"p50_ms"` // upper bounds of the histogram buckets (at most 19% over)
	P99     float64 `json:"p99_ms"`
	Max     float64 `json:"max_ms"`
}

type ruleView struct {
	Source     string            `json:"-"`
	Name       string            `json:"name"`
	Algorithm  string            `json:"algorithm"`
	Limit      string            `json:"limit"` // "" for a LimitFunc
	Rate       int64             `json:"rate"`
	Period     string            `json:"period"`
	Burst      int64             `json:"burst"`
	Capacity   int64             `json:"capacity"`
	Key        string            `json:"key"`
	Shadow     bool              `json:"shadow"`
	MissingKey string            `json:"missing_key"`
	Dynamic    bool              `json:"dynamic_limit"`
	Refundable bool              `json:"refundable"`
	Calendar   string            `json:"calendar,omitempty"` // a calendar quota's unit: day, week, month, year
	Location   string            `json:"location,omitempty"` // and its time zone
	Blocks     *blocksView       `json:"blocks"`             // null without quota blocks
	Tiers      map[string]string `json:"tiers,omitempty"`
	TierList   []tierView        `json:"-"`
	Totals     *counts           `json:"totals"`
	Windows    []windowView      `json:"windows"`
	Hottest    []keyView         `json:"hottest"`
	MostDenied []keyView         `json:"most_denied"`

	// The page's rows of the rule, built once (one template action each
	// instead of dozens: the page stays fast with many rules).
	DecisionRows, HotRows, DeniedRows template.HTML `json:"-"`
}

// blocksView is a rule's quota blocks (redlimit.BlockConfig, defaults
// applied): a reset of its keys goes through the engine's epochs, which
// the CLI must know (see docs/admin.md).
type blocksView struct {
	Hold    string  `json:"hold"`
	Share   float64 `json:"share"`
	Max     int64   `json:"max"`
	MinRate float64 `json:"min_rate"`
}

// rows renders the rule's decision rows.
func (rv *ruleView) rows() template.HTML {
	var b strings.Builder
	for i, w := range rv.Windows {
		b.WriteString("<tr")
		if i == 0 {
			b.WriteString(` id="decisions-` + template.HTMLEscapeString(rv.Source) + "-" + template.HTMLEscapeString(rv.Name) + `"><td rowspan="` + strconv.Itoa(len(rv.Windows)) + `"><b>` + template.HTMLEscapeString(rv.Name) + "</b></td")
		}
		b.WriteString("><td>" + w.Window)
		if w.Seconds < 59 {
			b.WriteString(` <span class="muted">(` + time.Duration(w.Seconds*float64(time.Second)).Round(time.Second).String() + ")</span>")
		}
		b.WriteString("</td>")
		b.WriteString(string(w.Cells))
		b.WriteString("</tr>\n")
	}
	return template.HTML(b.String())
}

// keyRows renders a key list's rows, or none.
func keyRows(list []keyView, none string) template.HTML {
	if len(list) == 0 {
		return template.HTML(`<tr><td colspan="3" class="muted">` + none + "</td></tr>")
	}
	var b strings.Builder
	for i := range list {
		b.WriteString(string(list[i].row()))
		b.WriteByte('\n')
	}
	return template.HTML(b.String())
}

type tierView struct{ Name, Limit string }

// counts are one rule's outcomes, in counter order; as JSON an object
// keyed by counter name.
type counts [nCounts]uint64

// MarshalJSON writes c as {"allowed":1,"denied":0,...}.
func (c *counts) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 200)
	for i, v := range c {
		b = append(b, ',', '"')
		b = append(b, counterNames[i]...)
		b = append(b, '"', ':')
		b = strconv.AppendUint(b, v, 10)
	}
	b[0] = '{'
	return append(b, '}'), nil
}

// cells renders c as table cells, followed by the share denied: numbers
// only, nothing to escape.
func (c *counts) cells() template.HTML {
	b := make([]byte, 0, 300)
	for _, v := range c {
		b = append(b, `<td class="n">`...)
		b = strconv.AppendUint(b, v, 10)
		b = append(b, "</td>"...)
	}
	b = append(b, `<td class="n">`...)
	denied := c[cDenied] + c[cDeniedLocal]
	if all := denied + c[cAllowed] + c[cShadowDenied] + c[cErrors] + c[cMissingKey]; all > 0 {
		b = strconv.AppendFloat(b, 100*float64(denied)/float64(all), 'f', 1, 64)
		b = append(b, '%')
	}
	return template.HTML(append(b, "</td>"...))
}

type windowView struct {
	Window  string        `json:"window"`
	Seconds float64       `json:"seconds"`
	Counts  *counts       `json:"counts"`
	Cells   template.HTML `json:"-"`
}

type keyView struct {
	Key   string `json:"key"`
	Keys  int    `json:"keys"`  // distinct keys behind a masked row
	Count uint64 `json:"count"` // at most Error too many
	Error uint64 `json:"error"`
}

// row renders k as a table row, its key escaped.
func (k *keyView) row() template.HTML {
	b := make([]byte, 0, 120+len(k.Key))
	b = append(b, `<tr><td class="k">`...)
	b = append(b, template.HTMLEscapeString(k.Key)...)
	if k.Keys > 1 {
		b = append(b, ` <span class="muted">(`...)
		b = strconv.AppendInt(b, int64(k.Keys), 10)
		b = append(b, ` keys)</span>`...)
	}
	b = append(b, `</td><td class="n">`...)
	b = strconv.AppendUint(b, k.Count, 10)
	b = append(b, `</td><td class="n muted">`...)
	b = strconv.AppendUint(b, k.Error, 10)
	return template.HTML(append(b, "</td></tr>"...))
}

type lookupView struct {
	Source     string  `json:"source"`
	Rule       string  `json:"rule"`
	Key        string  `json:"key"`         // as typed
	StorageKey string  `json:"storage_key"` // masked unless ShowKeys
	Shown      string  `json:"shown_as"`    // how the lists show the key
	Tier       string  `json:"tier,omitempty"`
	Decided    string  `json:"decided_by"`
	Evaluated  bool    `json:"evaluated"`
	Allowed    bool    `json:"allowed"` // would one unit pass now
	Limit      int64   `json:"limit"`
	Remaining  int64   `json:"remaining"`
	RetryAfter float64 `json:"retry_after_seconds"`
	ResetAfter float64 `json:"reset_after_seconds"`
	Local      bool    `json:"deny_cached"`
	Err        string  `json:"error,omitempty"`
	Reset      bool    `json:"reset,omitempty"` // this answer follows a Reset
}

var windows = []struct {
	name  string
	ticks int64
}{{"1m", 6}, {"5m", 30}, {"15m", 90}}

// view builds the page's data.
func (h *Handler) view(who string, html bool) *pageView {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	tick := h.tick.Load()
	v := &pageView{
		Time:     now,
		Uptime:   now.Sub(h.start).Seconds(),
		Masked:   !h.cfg.ShowKeys,
		CSRF:     h.csrfToken(who),
		Who:      who,
		TopSince: h.genSince,
		Counters: counterNames[:],
	}
	for _, w := range windows {
		v.Windows = append(v.Windows, w.name)
	}
	for _, s := range h.sources {
		v.Sources = append(v.Sources, h.sourceView(s, now, tick, html))
		for _, st := range s.rules() {
			v.RuleNames = append(v.RuleNames, ruleNameView{Value: s.name + "/" + st.rule.Name, Label: s.name + " / " + st.rule.Name})
		}
	}
	return v
}

// base returns the tick whose start a window of n ticks counts from, and
// the time it started.
func (h *Handler) base(tick, n int64) (int64, time.Time) {
	b := max(tick-n, 0)
	return b, h.tickedAt[b%ringLen]
}

func (h *Handler) sourceView(s *Source, now time.Time, tick int64, html bool) sourceView {
	sv := sourceView{Name: s.name}
	t := s.tab.Load()
	if t != nil && len(t.rules) > 0 {
		st := t.rules[0].eng.Status()
		sv.Prefix, sv.Policy, sv.OnFallback = st.Prefix, st.Policy.String(), st.OnFallback
		sv.DenyCache, sv.DenyKeys, sv.LocalDenials, sv.Stalled = st.DenyCache, st.DenyCacheKeys, st.LocalDenials, st.Stalled
	}
	if e := s.lastErr.Load(); e != nil {
		sv.LastError = &errorView{Message: e.err.Error(), At: e.at}
	}
	var cur [latBuckets]uint64
	for b := range cur {
		cur[b] = s.lat.buckets[b].Load()
	}
	for _, w := range windows {
		b, at := h.base(tick, w.ticks)
		lv := latencyView{Window: w.name, Seconds: round3(now.Sub(at).Seconds())}
		var hist [latBuckets]uint64
		for i := range hist {
			hist[i] = cur[i] - s.lat.history[b%ringLen][i]
			lv.Count += hist[i]
		}
		var m int64
		for i := b; i <= tick; i++ {
			m = max(m, s.lat.max[i%ringLen].Load())
		}
		// a bucket's upper bound may lie above the largest value seen
		lv.P50 = ms(min(quantile(&hist, lv.Count, 0.50), m))
		lv.P99 = ms(min(quantile(&hist, lv.Count, 0.99), m))
		lv.Max = ms(m)
		sv.Latency = append(sv.Latency, lv)
	}
	for _, st := range s.rules() {
		sv.Rules = append(sv.Rules, h.ruleView(s, st, now, tick, html))
	}
	return sv
}

// quantile returns the upper bound of the bucket holding the q quantile.
func quantile(hist *[latBuckets]uint64, n uint64, q float64) int64 {
	if n == 0 {
		return 0
	}
	rank := uint64(q*float64(n-1)) + 1
	var seen uint64
	for b, c := range hist {
		if seen += c; seen >= rank {
			return latUpper(b)
		}
	}
	return latUpper(latBuckets - 1)
}

func ms(ns int64) float64 { return round3(float64(ns) / 1e6) }

func round3(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 3, 64), 64)
	return v
}

func (h *Handler) ruleView(s *Source, st *ruleState, now time.Time, tick int64, html bool) ruleView {
	r := st.rule
	rv := ruleView{
		Source:     s.name,
		Name:       r.Name,
		Algorithm:  r.Algorithm.String(),
		Key:        st.key,
		Shadow:     r.Shadow,
		MissingKey: "deny",
		Dynamic:    r.LimitFunc != nil,
		Refundable: r.Refundable,
		Totals:     new(counts),
	}
	if r.MissingKey == redlimit.SkipMissingKey {
		rv.MissingKey = "skip"
	}
	if b := r.Blocks; b != nil {
		rv.Blocks = &blocksView{Hold: b.Hold.String(), Share: b.Share, Max: b.Max, MinRate: b.MinRate}
	}
	if !rv.Dynamic {
		rv.Limit = r.Limit.String()
		rv.Rate, rv.Burst, rv.Capacity = r.Limit.Rate, r.Limit.Burst, r.Limit.Capacity(r.Algorithm)
		rv.Period = r.Limit.Period.String()
		if r.Limit.Calendar != 0 {
			rv.Calendar = r.Limit.Calendar.String()
			rv.Location = "UTC"
			if r.Limit.Location != nil {
				rv.Location = r.Limit.Location.String()
			}
		}
	}
	if len(r.Tiers) > 0 {
		rv.Tiers = map[string]string{}
		for _, name := range slices.Sorted(maps.Keys(r.Tiers)) {
			rv.Tiers[name] = r.Tiers[name].String()
			rv.TierList = append(rv.TierList, tierView{name, r.Tiers[name].String()})
		}
	}
	cur := rv.Totals
	for c := range cur {
		cur[c] = st.counts[c].Load()
	}
	for _, w := range windows {
		b, at := h.base(tick, w.ticks)
		wv := windowView{Window: w.name, Seconds: round3(now.Sub(at).Seconds()), Counts: new(counts)}
		for c := range cur {
			wv.Counts[c] = cur[c] - st.history[b%ringLen][c]
		}
		if html {
			wv.Cells = wv.Counts.cells()
		}
		rv.Windows = append(rv.Windows, wv)
	}
	rv.Hottest = h.keyViews(st.hot)
	rv.MostDenied = h.keyViews(st.denied)
	if html {
		rv.DecisionRows = rv.rows()
		rv.HotRows = keyRows(rv.Hottest, "none yet")
		rv.DeniedRows = keyRows(rv.MostDenied, "none")
	}
	return rv
}

// keyViews merges the entries of both generations of a summary, and
// of keys that share a mask, and keeps the first TopKeys.
func (h *Handler) keyViews(hv *heavy) []keyView {
	top, merged := mergeEntries(hv.entries(nil), h.display, h.topKeys)
	out := make([]keyView, len(top))
	for i, e := range top {
		out[i] = keyView{Key: e.Key, Keys: merged[i], Count: e.Count, Error: e.Err}
	}
	return out
}

// display returns how the page shows the storage key k: its material,
// masked unless ShowKeys.
func (h *Handler) display(k string) string {
	m := materialOf(k)
	if h.cfg.ShowKeys {
		return m
	}
	h.masksMu.Lock()
	defer h.masksMu.Unlock()
	if v, ok := h.masks[m]; ok {
		return v
	}
	var v string
	if h.cfg.MaskKey != nil {
		v = h.cfg.MaskKey(m)
	} else {
		v = MaskKey(h.cfg.MaskSecret, m)
	}
	if len(h.masks) >= maxMasks {
		clear(h.masks)
	}
	h.masks[m] = v
	return v
}

// maxMasks bounds the masks remembered: the keys of a few pages.
const maxMasks = 1 << 14

// lookupResult fills a lookupView from a peek's RuleDecision.
func lookupResult(lv *lookupView, d *redlimit.Decision, rd *redlimit.RuleDecision) {
	lv.Decided = d.Source.String()
	lv.Evaluated = rd.Evaluated
	res := rd.Result
	lv.Allowed, lv.Limit, lv.Remaining, lv.Local = res.Allowed, res.Limit, res.Remaining, res.Local
	lv.RetryAfter = round3(res.RetryAfter.Seconds())
	lv.ResetAfter = round3(res.ResetAfter.Seconds())
	if d.Err != nil {
		lv.Err = d.Err.Error()
	}
}
