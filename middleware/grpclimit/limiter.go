package grpclimit

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/internal/after"
	"github.com/redlimit/redlimit/keyfunc"
)

// Config configures an [Interceptor]. Only Keys is required.
type Config struct {
	// Keys holds one Func per rule of the engine, in the engine's rule
	// order (redlimit.Limiter.Rules): Keys[i] gives the key material of
	// rule i for each call.
	Keys []Func

	// Exempt, when set, exempts a call from every rule: it is neither
	// charged nor decided, and costs no backend call. For health checks
	// and internal callers. It must be safe for concurrent use.
	Exempt func(ctx context.Context, method string) bool

	// Metadata selects the rate-limit metadata, as headers.Writer selects
	// HTTP headers (the zero value: x-ratelimit-limit,
	// x-ratelimit-remaining, x-ratelimit-reset as Unix seconds, and
	// retry-after on a denial). headers.None sends none.
	Metadata headers.Writer

	// MissingKeyCode is the status code of a call denied because a rule
	// found no key for it (redlimit.DenyMissingKey) and no rule denied it by
	// rate. The zero value means codes.ResourceExhausted;
	// codes.Unauthenticated suits rules keyed by a credential (an API key
	// in the metadata).
	MissingKeyCode codes.Code

	// Now is the clock of the epoch x-ratelimit-reset (default time.Now).
	// The engine's backend keeps its own clock.
	Now func() time.Time

	// OnReleaseError, when set, hears of every release of a concurrency
	// rule's slots that failed or timed out after a call (the slots then
	// come back when their leases expire), with the call's context and
	// full method, as middleware.Config.OnSettleError does for HTTP. The
	// engine's Logger hears of it too. It is called once the handler has
	// returned, usually from a worker goroutine after gRPC has the reply
	// (see Interceptor.Unary), when the call's context is done already; it
	// must be safe for concurrent use. A panic in it is logged.
	OnReleaseError func(ctx context.Context, method string, err error)

	// Logger receives a warning, at most once a second, while the queue
	// of releases after calls is full, and a panic of OnReleaseError.
	// Default slog.Default().
	Logger *slog.Logger
}

// Interceptor limits gRPC calls by the rules of an [redlimit.Limiter]: its
// [Interceptor.Unary] and [Interceptor.Stream] methods are server interceptors.
// Build it with [New]; it is safe for concurrent use. Close it when done
// ([Interceptor.Close]) to wait for the releases of concurrency slots queued
// after calls.
type Interceptor struct {
	engine  *redlimit.Limiter
	cfg     Config
	missing codes.Code
	names   []string              // the rules' names, in rule order: Config.Keys[i] is rule i's
	holds   bool                  // a rule is a concurrency rule: allowed calls hold slots
	local   bool                  // the limiter's store runs in process: releases are made at once
	pool    sync.Pool             // *scratch
	after   *after.Queue[release] // the releases after calls (release.go)
}

type scratch struct {
	in       []redlimit.Input
	dec      redlimit.Decision
	policies []headers.Policy
	hdr      http.Header
}

// New returns an Interceptor deciding calls with e, configured by cfg. An
// invalid configuration is an *[algorithms.ConfigError] naming the field:
// a nil e, Keys not holding one non-nil Func per rule of e, an unknown
// Metadata style, or a MissingKeyCode that is not an error code.
func New(e *redlimit.Limiter, cfg Config) (*Interceptor, error) {
	if e == nil {
		return nil, &algorithms.ConfigError{Field: "engine", Reason: "must not be nil"}
	}
	var names []string
	holds := false
	for _, r := range e.Rules() {
		names = append(names, r.Name)
		holds = holds || r.Algorithm == algorithms.Concurrency
	}
	if len(cfg.Keys) != len(names) {
		return nil, &algorithms.ConfigError{Field: "Config.Keys", Reason: "must hold one Func per rule of the engine, in order (" + strings.Join(names, ", ") + "): want " + strconv.Itoa(len(names)) + ", got " + strconv.Itoa(len(cfg.Keys))}
	}
	for i, k := range cfg.Keys {
		if k == nil {
			return nil, &algorithms.ConfigError{Rule: names[i], Field: "Config.Keys[" + strconv.Itoa(i) + "]", Reason: "must not be nil"}
		}
	}
	if err := cfg.Metadata.Validate(); err != nil {
		return nil, err
	}
	missing := cfg.MissingKeyCode
	switch {
	case missing == codes.OK:
		missing = codes.ResourceExhausted
	case missing > codes.Unauthenticated:
		return nil, &algorithms.ConfigError{Field: "Config.MissingKeyCode", Reason: "must be a gRPC error code, got " + strconv.Itoa(int(missing))}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Keys = append([]Func(nil), cfg.Keys...)
	l := &Interceptor{engine: e, cfg: cfg, missing: missing, names: names, holds: holds, local: e.Status().InProcess}
	l.after = newAfter(l, after.Workers, after.Size)
	n := len(names)
	l.pool.New = func() any { return &scratch{in: make([]redlimit.Input, n), hdr: http.Header{}} }
	return l, nil
}

// Engine returns the engine l decides with: code outside the interceptors
// can Peek or Reset the same buckets by key material.
func (l *Interceptor) Limiter() *redlimit.Limiter { return l.engine }

// Unary is a grpc.UnaryServerInterceptor: pass the method value,
// grpc.ChainUnaryInterceptor(l.Unary). An allowed call reaches handler
// with the rate-limit state in its header metadata; a refused one gets the
// status and trailer metadata described in the package documentation.
//
// The slots of concurrency rules are held while handler runs (their
// leases renewed if it runs long). When it returns (or panics), Unary
// queues their release and returns: gRPC sends the reply without waiting
// for the release's round trip, which a worker makes. At most 16 workers
// run per Interceptor and at most 1024 releases wait for one; when the queue
// is full, or after Close, the call makes its own release before Unary
// returns (its client then waits for it, at most the engine's Timeout),
// so none is dropped. Slots on a backend that runs in process (memstore)
// are released at once. A release that fails goes to
// Config.OnReleaseError.
func (l *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, held, err := l.decide(ctx, info.FullMethod)
	if held != nil {
		// the slots of concurrency rules, released after the call (release.go)
		defer l.done(ctx, info.FullMethod, held)
		held.KeepAlive(context.WithoutCancel(ctx))
	}
	if err != nil {
		if md != nil {
			grpc.SetTrailer(ctx, md) // fails only outside a server call
		}
		return nil, err
	}
	if md != nil {
		grpc.SetHeader(ctx, md)
	}
	return handler(ctx, req)
}

// Stream is a grpc.StreamServerInterceptor: pass the method value,
// grpc.ChainStreamInterceptor(l.Stream). A stream is decided once, when it
// opens, as one unit; its messages are not counted. The slots of
// concurrency rules are held while handler runs, and released after it
// returns as Unary releases them: gRPC ends the stream (its status)
// without waiting for the release.
func (l *Interceptor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	md, held, err := l.decide(ss.Context(), info.FullMethod)
	if held != nil {
		// the slots of concurrency rules, held while the stream is open and
		// released after it (release.go)
		defer l.done(ss.Context(), info.FullMethod, held)
		held.KeepAlive(context.WithoutCancel(ss.Context()))
	}
	if err != nil {
		if md != nil {
			ss.SetTrailer(md)
		}
		return err
	}
	if md != nil {
		ss.SetHeader(md)
	}
	return handler(srv, ss)
}

// Decide decides one call of method with ctx's peer and metadata, as the
// interceptors do, and returns the Decision (the caller's) and the error
// the interceptors would answer with (nil when allowed): for code that
// decides inside a handler, or for a client-side check.
func (l *Interceptor) Decide(ctx context.Context, method string) (*redlimit.Decision, error) {
	s := l.pool.Get().(*scratch)
	defer l.put(s)
	l.run(ctx, method, s)
	return s.dec.Clone(), l.refusal(&s.dec)
}

// decide decides one call and returns the metadata to send (nil for none),
// the Decision when it holds the slots of concurrency rules (nil
// otherwise), which the caller releases when the call ends, and the
// status error of a refused call.
func (l *Interceptor) decide(ctx context.Context, method string) (metadata.MD, *redlimit.Decision, error) {
	s := l.pool.Get().(*scratch)
	defer l.put(s)
	l.run(ctx, method, s)
	var held *redlimit.Decision
	if l.holds && holds(&s.dec) {
		held = s.dec.Clone()
	}
	return l.metadata(s), held, l.refusal(&s.dec)
}

func (l *Interceptor) put(s *scratch) {
	clear(s.in)
	clear(s.hdr)
	l.pool.Put(s)
}

// run builds one Input per rule and decides them into s.dec.
func (l *Interceptor) run(ctx context.Context, method string, s *scratch) {
	exempt := l.cfg.Exempt != nil && l.cfg.Exempt(ctx, method)
	for i, key := range l.cfg.Keys {
		x := &s.in[i]
		if exempt {
			*x = redlimit.Input{Rule: l.names[i], Exempt: true}
			continue
		}
		k, err := key(ctx, method)
		switch {
		case err == nil:
			*x = redlimit.Input{Rule: l.names[i], Material: k}
		case errors.Is(err, keyfunc.ErrNoKey):
			*x = redlimit.Input{Rule: l.names[i], Missing: true}
		default:
			*x = redlimit.Input{Rule: l.names[i], Err: err}
		}
	}
	l.engine.Decide(ctx, s.in, &s.dec)
}

// holds reports whether the decision d may hold the slots of a
// concurrency rule: allowed, and one was decided, and allowed, by a
// backend. Settle releases them (and does nothing for a decision that
// holds none).
func holds(d *redlimit.Decision) bool {
	if !d.Allowed || d.Source == redlimit.SourceNone {
		return false
	}
	for i := range d.Rules {
		if rd := &d.Rules[i]; rd.Algorithm == algorithms.Concurrency && rd.Evaluated && rd.Result.Allowed {
			return true
		}
	}
	return false
}

// refusal returns the status error of a refused decision, nil for an
// allowed one.
func (l *Interceptor) refusal(d *redlimit.Decision) error {
	switch {
	case d.Allowed:
		return nil
	case d.Failed:
		return errUnavailable
	}
	var names []string
	for i := range d.Rules {
		rd := &d.Rules[i]
		switch {
		case rd.Shadow:
		case rd.MissingKey:
			// the engine stops at a missing key, before any backend call:
			// no rule denied the call by rate
			return status.Error(l.missing, "redlimit: no key for rule "+strconv.Quote(rd.Name))
		case rd.Evaluated && !rd.Result.Allowed:
			names = append(names, strconv.Quote(rd.Name))
		}
	}
	if len(names) == 0 {
		return errExhausted
	}
	return status.Error(codes.ResourceExhausted, "redlimit: rate limit exceeded (rule "+strings.Join(names, ", ")+")")
}

var (
	errUnavailable = status.Error(codes.Unavailable, "redlimit: rate limiter unavailable")
	errExhausted   = status.Error(codes.ResourceExhausted, "redlimit: rate limit exceeded")
)

// metadata returns the rate-limit state of s.dec as metadata, or nil when
// no rule was evaluated or Metadata is headers.None.
func (l *Interceptor) metadata(s *scratch) metadata.MD {
	if l.cfg.Metadata.Style == headers.None || s.dec.Failed {
		return nil
	}
	d := &s.dec
	s.policies = s.policies[:0]
	for i := range d.Rules {
		if rd := &d.Rules[i]; rd.Evaluated {
			s.policies = append(s.policies, headers.Policy{Name: rd.Name, Window: rd.Window(), Result: rd.Result})
		}
	}
	if len(s.policies) == 0 {
		return nil
	}
	l.cfg.Metadata.Write(s.hdr, l.cfg.Now(), s.policies)
	if d.Allowed && d.WouldDeny {
		delete(s.hdr, "Retry-After") // shadow denials: the call is not refused
	}
	md := make(metadata.MD, len(s.hdr))
	for k, v := range s.hdr {
		md[mdKey(k)] = v
	}
	return md
}

// mdKey returns the metadata key of a header field headers.Writer writes:
// its name in lower case, as gRPC requires.
func mdKey(h string) string {
	switch h {
	case "X-Ratelimit-Limit":
		return "x-ratelimit-limit"
	case "X-Ratelimit-Remaining":
		return "x-ratelimit-remaining"
	case "X-Ratelimit-Reset":
		return "x-ratelimit-reset"
	case "Retry-After":
		return "retry-after"
	case "Ratelimit-Policy":
		return "ratelimit-policy"
	case "Ratelimit":
		return "ratelimit"
	}
	return strings.ToLower(h)
}
