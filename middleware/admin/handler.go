package admin

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"hash/maphash"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/rulename"
)

// Config configures a [Handler]. Authorize is required.
type Config struct {
	// Authorize decides who may see the page and reset keys: it returns
	// the name of the person or system asking (logged with every Reset)
	// and whether they may. Required: there is no default open access.
	// See [Token] for a shared secret. It must be safe for concurrent
	// use.
	Authorize func(*http.Request) (who string, ok bool)

	// Logger receives a line per Reset (Info: who, which rule, which key,
	// from where). Default slog.Default(); give it the service's logger.
	Logger *slog.Logger

	// ShowKeys shows key material as it is. By default the page and its
	// JSON mask it (see MaskKey): the page is for finding patterns, and
	// its screenshots travel.
	ShowKeys bool

	// MaskKey, when set, replaces the default masking of key material
	// (IPv4 addresses to their /24, IPv6 to their /48, anything else to
	// "#" and 12 hex digits of its HMAC-SHA-256 under MaskSecret: see the
	// function MaskKey). Keys with the same mask are shown as one row,
	// their counts summed.
	MaskKey func(material string) string

	// MaskSecret keys the HMAC with which the default masking hides key
	// material that is no IP address, so that a user id or an e-mail
	// address cannot be recovered from its mask by hashing a dictionary.
	// Empty (the default): a secret drawn at random once per process, so
	// each instance (and each restart) shows a key under a mask of its
	// own. Set the same secret, at least MinMaskSecret (16) bytes, on every
	// instance to have their pages agree; keep it as secret as the keys
	// (whoever holds it can test guesses against the masks). New copies
	// it.
	MaskSecret []byte

	// TopKeys is how many keys the hottest and most denied lists show per
	// rule (default 10).
	TopKeys int

	// SketchSize is how many keys each heavy-hitters summary counts
	// (default 64, at least TopKeys): a key seen more than 1/SketchSize
	// of a rule's decisions is always among them. Each rule has four
	// summaries of this size (hottest, most denied; current and previous
	// minute), about 4 × 60 bytes per key.
	SketchSize int

	// Now is the clock (default time.Now), for tests.
	Now func() time.Time
}

// Handler is the admin page of one or more limiters: an http.Handler to
// mount on an internal listener, as net/http/pprof and expvar are. Build
// it with [New], get a [Source] per limiter with Source, and Close it
// when done. It is safe for concurrent use.
type Handler struct {
	cfg        Config
	sketchSize int
	topKeys    int
	seed       maphash.Seed
	secret     [32]byte // keys the CSRF tokens
	cop        *http.CrossOriginProtection
	start      time.Time

	mu       sync.Mutex // sources, and the histories the ticks write
	sources  []*Source
	tick     atomic.Int64 // ticks since start
	tickedAt [ringLen]time.Time
	genSince time.Time // start of the previous sketch generation

	masksMu sync.Mutex
	masks   map[string]string // material -> display, see display

	stop chan struct{}
	done chan struct{}
}

// Every tick (10 s) the counters are copied into a ring that keeps 15
// minutes of them; every sixth tick the heavy-hitters summaries start a
// new generation, the page showing the current and previous minute.
const (
	tickEvery  = 10 * time.Second
	ringLen    = 15*60/10 + 1
	ticksOfGen = 6
)

// New returns a Handler configured by cfg, or an *algorithms.ConfigError
// naming the field when cfg is invalid: Authorize nil. It starts one
// goroutine, which Close stops.
func New(cfg Config) (*Handler, error) {
	h, err := newHandler(cfg)
	if err != nil {
		return nil, err
	}
	h.stop, h.done = make(chan struct{}), make(chan struct{})
	go h.run()
	return h, nil
}

// newHandler returns a Handler whose ticks nobody runs (tests tick it).
func newHandler(cfg Config) (*Handler, error) {
	if cfg.Authorize == nil {
		return nil, &algorithms.ConfigError{Field: "admin.Config.Authorize", Reason: "must be set: the admin page serves nobody without an authorization (see admin.Token)"}
	}
	if n := len(cfg.MaskSecret); n != 0 && n < MinMaskSecret {
		return nil, &algorithms.ConfigError{Field: "admin.Config.MaskSecret", Reason: "must be empty (a random secret per process) or at least 16 bytes, got " + strconv.Itoa(n)}
	}
	cfg.MaskSecret = bytes.Clone(cfg.MaskSecret)
	if cfg.TopKeys < 0 || cfg.SketchSize < 0 {
		return nil, &algorithms.ConfigError{Field: "admin.Config.TopKeys", Reason: "TopKeys and SketchSize must be >= 0"}
	}
	if cfg.TopKeys == 0 {
		cfg.TopKeys = 10
	}
	if cfg.SketchSize == 0 {
		cfg.SketchSize = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Handler{
		cfg:        cfg,
		sketchSize: max(cfg.SketchSize, cfg.TopKeys),
		topKeys:    cfg.TopKeys,
		seed:       maphash.MakeSeed(),
		cop:        http.NewCrossOriginProtection(),
		start:      cfg.Now(),
		masks:      map[string]string{},
	}
	rand.Read(h.secret[:])
	h.tickedAt[0] = h.start
	h.genSince = h.start
	return h, nil
}

func (h *Handler) now() time.Time { return h.cfg.Now() }

// Source returns the Source named name (1 to 64 characters from
// [A-Za-z0-9_.-]), made on first use: one per limiter the page shows.
func (h *Handler) Source(name string) (*Source, error) {
	if !rulename.Valid(name) {
		return nil, &algorithms.ConfigError{Field: "admin.Handler.Source", Reason: "name must be 1-64 characters from [A-Za-z0-9_.-], got \"" + name + "\""}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.sources {
		if s.name == name {
			return s, nil
		}
	}
	s := &Source{name: name, h: h}
	h.sources = append(h.sources, s)
	return s, nil
}

// Close stops the Handler's goroutine. The hooks and the page keep
// working, but the windows stop moving.
func (h *Handler) Close() error {
	if h.stop != nil {
		select {
		case <-h.stop:
		default:
			close(h.stop)
			<-h.done
		}
	}
	return nil
}

func (h *Handler) run() {
	defer close(h.done)
	t := time.NewTicker(tickEvery)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			h.advance()
		}
	}
}

// advance ends a tick: the counters of its end go into the ring, and
// every ticksOfGen ticks the summaries rotate.
func (h *Handler) advance() {
	h.mu.Lock()
	defer h.mu.Unlock()
	next := h.tick.Load() + 1
	slot := next % ringLen
	h.tickedAt[slot] = h.now()
	for _, s := range h.sources {
		s.lat.max[slot].Store(0)
		for b := range s.lat.buckets {
			s.lat.history[slot][b] = s.lat.buckets[b].Load()
		}
		for _, st := range s.rules() {
			for c := range st.counts {
				st.history[slot][c] = st.counts[c].Load()
			}
			if next%ticksOfGen == 0 {
				st.hot.rotate()
				st.denied.rotate()
			}
		}
	}
	if next%ticksOfGen == 0 {
		h.genSince = h.tickedAt[(next-ticksOfGen)%ringLen]
	}
	h.tick.Store(next)
}

// csrfToken is the token a form of who must carry to POST.
func (h *Handler) csrfToken(who string) string {
	m := hmac.New(sha256.New, h.secret[:])
	m.Write([]byte("redlimit-admin-csrf\x00"))
	m.Write([]byte(who))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:18])
}

func (h *Handler) validCSRF(who, token string) bool {
	return hmac.Equal([]byte(h.csrfToken(who)), []byte(token))
}
