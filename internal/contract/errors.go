package contract

import (
	"errors"

	"github.com/redlimit/redlimit/algorithms"
)

// WithRule returns a copy of err naming rule when err is a
// *algorithms.ConfigError without a rule, and err unchanged otherwise.
func WithRule(err error, rule string) error {
	var ce *algorithms.ConfigError
	if errors.As(err, &ce) && ce.Rule == "" {
		c := *ce
		c.Rule = rule
		return &c
	}
	return err
}
