package middleware

import (
	"net/http"
	"slices"
	"strings"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/internal/rulename"
	"github.com/redlimit/redlimit/keyfunc"
)

// PerIP returns a Middleware with one rule, named "ip", that limits each
// client IP address to limit under alg:
//
//	mw, err := middleware.PerIP(backend, algorithms.GCRA, algorithms.PerMinute(100))
//
// The client IP is the TCP peer's (IPv6 grouped by /64) unless
// [WithIPConfig] names the trusted proxies whose forwarding header to
// believe (see [keyfunc.IP]). Like [PerHeader], [PerUser] and [PerKey], it
// is [redlimit.New] with a Config of one rule and [New] on that Limiter:
// invalid arguments are an *[algorithms.ConfigError], never a panic;
// [WithLimiterConfig] sets the rest of the Limiter's Config (prefix,
// timeout, error policy, ...), [WithConfig] the rest of the Middleware's
// and [WithName] the rule's name. The Middleware owns its Limiter
// (Middleware.Limiter): its Close closes it. Two Middlewares whose rules
// have the same name and algorithm count in the same buckets: name the
// rule of each route that must count alone.
func PerIP(backend algorithms.Backend, alg algorithms.Algorithm, limit algorithms.Limit, opts ...Option) (*Middleware, error) {
	s, err := newShortcut(true, "ip", opts)
	if err != nil {
		return nil, err
	}
	ip, err := keyfunc.IP(s.ip)
	if err != nil {
		return nil, contract.WithRule(err, s.name)
	}
	return s.build(backend, ip, alg, limit)
}

// PerHeader returns a Middleware with one rule that limits each value of
// the request header name (an API key) to limit under alg:
//
//	mw, err := middleware.PerHeader(backend, "X-API-Key", algorithms.GCRA, algorithms.PerMinute(100))
//
// The rule is named after the header in lower case ("x-api-key"), or
// "header" when the header's name is not a valid rule name. A request
// without the header is denied (429, or 401 with Config.MissingKeyDenied
// set to [Unauthorized], see [WithConfig]). The value is the client's to
// choose: it limits a client only when the application also checks it
// (see [keyfunc.Header]). An empty or invalid header name is an
// *[algorithms.ConfigError]. See [PerIP] for the rest.
func PerHeader(backend algorithms.Backend, name string, alg algorithms.Algorithm, limit algorithms.Limit, opts ...Option) (*Middleware, error) {
	key, err := header(name)
	if err != nil {
		return nil, err
	}
	rule := strings.ToLower(name)
	if !rulename.Valid(rule) {
		rule = "header"
	}
	s, err := newShortcut(false, rule, opts)
	if err != nil {
		return nil, err
	}
	return s.build(backend, key, alg, limit)
}

// PerUser returns a Middleware with one rule, named "user", that limits
// each user to limit under alg. user returns the request's user, typically
// from what an authentication middleware stored in its context, and false
// (or "") for an anonymous request, which is denied (429, or 401 with
// Config.MissingKeyDenied set to [Unauthorized]); see [keyfunc.User]. A nil
// user is an *[algorithms.ConfigError]. See [PerIP] for the rest.
func PerUser(backend algorithms.Backend, user func(*http.Request) (string, bool), alg algorithms.Algorithm, limit algorithms.Limit, opts ...Option) (*Middleware, error) {
	if user == nil {
		return nil, &algorithms.ConfigError{Field: "PerUser user", Reason: "must not be nil"}
	}
	s, err := newShortcut(false, "user", opts)
	if err != nil {
		return nil, err
	}
	key, err := keyfunc.User(user)
	if err != nil {
		return nil, err
	}
	return s.build(backend, key, alg, limit)
}

// PerKey returns a Middleware with one rule, named "key", that limits each
// key that key finds to limit under alg: the general form of [PerIP],
// [PerHeader] and [PerUser]. A nil key is an *[algorithms.ConfigError].
// See [PerIP] for the rest.
func PerKey(backend algorithms.Backend, key keyfunc.Func, alg algorithms.Algorithm, limit algorithms.Limit, opts ...Option) (*Middleware, error) {
	if key == nil {
		return nil, &algorithms.ConfigError{Field: "PerKey key", Reason: "must not be nil"}
	}
	s, err := newShortcut(false, "key", opts)
	if err != nil {
		return nil, err
	}
	return s.build(backend, key, alg, limit)
}

// Option adjusts what [PerIP], [PerHeader], [PerUser] and [PerKey] build.
type Option interface {
	apply(*shortcut) error
}

type optionFunc func(*shortcut) error

func (f optionFunc) apply(s *shortcut) error { return f(s) }

// WithName names the rule (default "ip", the header in lower case, "user"
// or "key"). The name is part of the storage key: Middlewares whose rules
// share a name and algorithm share their buckets.
func WithName(name string) Option {
	return optionFunc(func(s *shortcut) error { s.name = name; return nil })
}

// WithIPConfig says how [PerIP] finds the client IP: the trusted proxies
// and their forwarding header, the prefix lengths (see [keyfunc.IPConfig]).
// Given to another constructor, it is an *[algorithms.ConfigError].
func WithIPConfig(ip keyfunc.IPConfig) Option {
	return optionFunc(func(s *shortcut) error {
		if !s.perIP {
			return &algorithms.ConfigError{Field: "WithIPConfig", Reason: "applies to PerIP only"}
		}
		s.ip = ip
		return nil
	})
}

// WithConfig sets the rest of the Middleware's Config: headers,
// Exempt, MissingKeyDenied, hooks, ... The constructor's Rule is added
// after cfg.Rules, if any (each naming a rule of WithLimiterConfig's).
func WithConfig(cfg Config) Option {
	return optionFunc(func(s *shortcut) error { s.cfg = cfg; return nil })
}

// WithLimiterConfig sets the rest of the Limiter's Config: prefix,
// timeout, error policy, fallback, clock, logger, ... The constructor's
// rule is added after cfg.Rules, if any.
func WithLimiterConfig(cfg redlimit.Config) Option {
	return optionFunc(func(s *shortcut) error { s.lim = cfg; return nil })
}

// shortcut is what the options of a one-line constructor set.
type shortcut struct {
	perIP bool // WithIPConfig applies
	name  string
	ip    keyfunc.IPConfig
	cfg   Config
	lim   redlimit.Config
}

func newShortcut(perIP bool, name string, opts []Option) (*shortcut, error) {
	s := &shortcut{perIP: perIP, name: name}
	for _, o := range opts {
		if o == nil {
			return nil, &algorithms.ConfigError{Field: "Option", Reason: "must not be nil"}
		}
		if err := o.apply(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *shortcut) build(backend algorithms.Backend, key keyfunc.Func, alg algorithms.Algorithm, limit algorithms.Limit) (*Middleware, error) {
	lcfg := s.lim
	lcfg.Rules = append(slices.Clone(lcfg.Rules), redlimit.Rule{Name: s.name, Algorithm: alg, Limit: limit})
	lim, err := redlimit.New(backend, lcfg)
	if err != nil {
		return nil, err
	}
	cfg := s.cfg
	cfg.Rules = append(slices.Clone(cfg.Rules), Rule{Name: s.name, Key: key})
	m, err := New(lim, cfg)
	if err != nil {
		lim.Close()
		return nil, err
	}
	m.own = true
	return m, nil
}

// header returns keyfunc.Header(name), or the *algorithms.ConfigError with
// which keyfunc.Header refuses a name that can never be a header's, naming
// PerHeader's argument.
func header(name string) (keyfunc.Func, error) {
	f, err := keyfunc.Header(name)
	if ce, ok := err.(*algorithms.ConfigError); ok {
		c := *ce
		c.Field = "PerHeader name"
		return nil, &c
	}
	return f, err
}
