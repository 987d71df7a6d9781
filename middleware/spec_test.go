package middleware_test

import (
	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/mwspec"
	"github.com/redlimit/redlimit/middleware"
)

// spec and specRule: the tests' shorthand for a Limiter and its
// Middleware, each rule written once (internal/mwspec).
type (
	spec     = mwspec.Spec
	specRule = mwspec.Rule
)

// build builds the Limiter of s on b and its Middleware, which owns the
// Limiter (its Close closes both); the first error of either is
// returned.
func build(b algorithms.Backend, s spec) (*middleware.Middleware, error) {
	lc, mc := s.Configs()
	lim, err := redlimit.New(b, lc)
	if err != nil {
		return nil, err
	}
	mw, err := middleware.New(lim, mc)
	if err != nil {
		lim.Close()
		return nil, err
	}
	middleware.Own(mw)
	return mw, nil
}

// with returns mw with rules added, on its Limiter with their limits
// added (redlimit.Limiter.With).
func with(mw *middleware.Middleware, rules ...specRule) (*middleware.Middleware, error) {
	lr, mr := mwspec.Split(rules)
	lim, err := mw.Limiter().With(lr...)
	if err != nil {
		return nil, err
	}
	return mw.With(lim, mr...)
}

// specOpts returns the Options of a shortcut that set s's two Configs.
func specOpts(s spec) []middleware.Option {
	lc, mc := s.Configs()
	return []middleware.Option{middleware.WithLimiterConfig(lc), middleware.WithConfig(mc)}
}
