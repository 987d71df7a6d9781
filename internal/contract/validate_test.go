package contract_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/contract"
)

// TestValidateRefunds: refunds a Refunder must refuse, before it changes
// anything.
func TestValidateRefunds(t *testing.T) {
	check := algorithms.Check{Key: "k", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10), Cost: 3, RefundWindow: time.Minute}
	ok := algorithms.Result{Allowed: true, Limit: 10, Receipt: algorithms.Receipt{Marker: "m", At: 1}}
	cases := []struct {
		name    string
		refunds []algorithms.Refund
		want    string // "" for valid
	}{
		{"valid", []algorithms.Refund{{Check: check, Result: ok, Units: 3}}, ""},
		{"no units", []algorithms.Refund{{Check: check, Result: ok}}, ""},
		{"negative units", []algorithms.Refund{{Check: check, Result: ok, Units: -1}}, "Refund.Units must be between 0 and the check's cost 3, got -1"},
		{"units above the cost", []algorithms.Refund{{Check: check, Result: ok, Units: 4}}, "Refund.Units"},
		{"no receipt", []algorithms.Refund{{Check: check, Result: algorithms.Result{Allowed: true, Limit: 10}, Units: 1}}, "carries no Receipt"},
		{"denied", []algorithms.Refund{{Check: check, Result: algorithms.Result{Limit: 10, Receipt: ok.Receipt}, Units: 1}}, "carries no Receipt"},
		{"concurrency", []algorithms.Refund{{Check: algorithms.Check{Key: "c", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(3, time.Minute), Lease: 9}, Result: ok}}, "Refund.Check.Algorithm is concurrency, whose slots are released (Leaser), never refunded"},
		{"concurrency window", []algorithms.Refund{{Check: algorithms.Check{Key: "c", Algorithm: algorithms.Concurrency, Limit: algorithms.InFlight(3, time.Minute), RefundWindow: time.Minute}, Result: ok}}, "Check.RefundWindow must be 0 for concurrency"},
		{"twice", []algorithms.Refund{{Check: check, Result: ok, Units: 1}, {Check: check, Result: ok, Units: 1}}, "appears twice"},
		{"invalid check", []algorithms.Refund{{Check: algorithms.Check{Key: "k", Algorithm: algorithms.GCRA, RefundWindow: time.Minute}, Result: ok, Units: 1}}, "Limit.Rate"},
		{"negative window", []algorithms.Refund{{Check: algorithms.Check{Key: "k", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1), RefundWindow: -1}, Result: ok}}, "Check.RefundWindow must be >= 0"},
	}
	for _, c := range cases {
		err := contract.ValidateRefunds(c.refunds)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: ValidateRefunds = %v, want nil", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, algorithms.ErrInvalidConfig)):
			t.Errorf("%s: ValidateRefunds = %v, want an ErrInvalidConfig containing %q", c.name, err, c.want)
		}
	}
}
