package ginlimit_test

import "github.com/redlimit/redlimit/internal/mwspec"

// spec and specRule: the tests' shorthand for a Limiter and its
// Middleware, each rule written once (internal/mwspec).
type (
	spec     = mwspec.Spec
	specRule = mwspec.Rule
)
