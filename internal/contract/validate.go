package contract

import (
	"strconv"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// maxSlots is the largest Rate of a Concurrency Limit (algorithms.Limit.Validate).
const maxSlots = 10_000

// MaxBlockHold is the longest hold of a quota block (algorithms.Blocker).
const MaxBlockHold = 10 * time.Second

// ValidateCall returns the error a Backend returns for a call it cannot
// evaluate, before it stores anything: a *algorithms.ConfigError when
// checks is empty, results is shorter than checks, a Key is empty or
// appears twice, a Limit is invalid for its Algorithm
// (algorithms.Limit.Validate) or a Cost is negative; nil otherwise. Every
// store of this module validates calls with it, so they reject the same
// calls with the same messages.
func ValidateCall(checks []algorithms.Check, results []algorithms.Result) error {
	if len(checks) == 0 {
		return &algorithms.ConfigError{Field: "checks", Reason: "must not be empty"}
	}
	if len(results) < len(checks) {
		return &algorithms.ConfigError{Field: "results", Reason: "must hold one Result per Check, got " + itoa(int64(len(results))) + " for " + itoa(int64(len(checks)))}
	}
	for i := range checks {
		c := &checks[i]
		if c.Key == "" {
			return &algorithms.ConfigError{Field: "Check.Key", Reason: "must not be empty"}
		}
		for j := range i {
			if checks[j].Key == c.Key {
				return &algorithms.ConfigError{Field: "Check.Key", Reason: "appears twice in one call: " + quote(c.Key)}
			}
		}
		if err := c.Limit.Validate(c.Algorithm); err != nil {
			return err
		}
		if c.Cost < 0 {
			return &algorithms.ConfigError{Field: "Cost", Reason: "must be >= 0, got " + itoa(c.Cost)}
		}
		if c.Algorithm == algorithms.Concurrency && c.Lease > MaxLease {
			return &algorithms.ConfigError{Field: "Check.Lease", Reason: "must be at most 2^52-1, got " + strconv.FormatUint(c.Lease, 10)}
		}
		if c.RefundWindow < 0 {
			return &algorithms.ConfigError{Field: "Check.RefundWindow", Reason: "must be >= 0, got " + c.RefundWindow.String()}
		}
		if c.RefundWindow != 0 && c.Algorithm == algorithms.Concurrency {
			return &algorithms.ConfigError{Field: "Check.RefundWindow", Reason: "must be 0 for concurrency: release its lease instead (Leaser)"}
		}
	}
	return nil
}

// ValidateBlock returns the error a Blocker returns for a block it cannot
// take: a *algorithms.ConfigError when c is an invalid check
// ([ValidateCall]), not of TokenBucket or GCRA, refundable, or when hold
// is not between 1µs and [MaxBlockHold]; nil otherwise.
func ValidateBlock(c algorithms.Check, hold time.Duration) error {
	if err := ValidateCall([]algorithms.Check{c}, []algorithms.Result{{}}); err != nil {
		return err
	}
	switch {
	case c.Algorithm != algorithms.TokenBucket && c.Algorithm != algorithms.GCRA:
		return &algorithms.ConfigError{Field: "Check.Algorithm", Reason: "must be token_bucket or gcra for a block, got " + c.Algorithm.String()}
	case c.RefundWindow != 0:
		return &algorithms.ConfigError{Field: "Check.RefundWindow", Reason: "must be 0 for a block: its units are never given back"}
	case hold < time.Microsecond || hold > MaxBlockHold:
		return &algorithms.ConfigError{Field: "hold", Reason: "must be between 1µs and 10s, got " + hold.String()}
	}
	return nil
}

// ValidateLeases returns the error a Leaser returns for leases it cannot
// release or renew, before it stores anything: a *algorithms.ConfigError
// when held (for Renew; nil for Release) is shorter than leases, a Key is
// empty, an ID is not from 1 to [MaxLease], a Cost is negative or above
// 10000, or, with held, a Period is not a whole number of microseconds
// from 1µs to 366 days; nil otherwise.
func ValidateLeases(leases []algorithms.Lease, held []bool) error {
	if held != nil && len(held) < len(leases) {
		return &algorithms.ConfigError{Field: "held", Reason: "must hold one bool per Lease, got " + itoa(int64(len(held))) + " for " + itoa(int64(len(leases)))}
	}
	for i := range leases {
		l := &leases[i]
		switch {
		case l.Key == "":
			return &algorithms.ConfigError{Field: "Lease.Key", Reason: "must not be empty"}
		case l.ID == 0 || l.ID > MaxLease:
			return &algorithms.ConfigError{Field: "Lease.ID", Reason: "must be 1 to 2^52-1, got " + strconv.FormatUint(l.ID, 10)}
		case l.Cost < 0 || l.Cost > maxSlots:
			return &algorithms.ConfigError{Field: "Lease.Cost", Reason: "must be 0 to 10000, got " + itoa(l.Cost)}
		}
		if held != nil {
			if err := (algorithms.Limit{Rate: 1, Period: l.Period}).Validate(algorithms.Concurrency); err != nil {
				ce := *err.(*algorithms.ConfigError)
				ce.Field = "Lease.Period"
				return &ce
			}
		}
	}
	return nil
}

// ValidateRefunds returns the error a Refunder returns for refunds it
// cannot make, before it changes anything: a *algorithms.ConfigError when
// a Check is invalid (see [ValidateCall]), its Result carries no Receipt
// (the check was not refundable, or not allowed), Units is negative or
// above the check's cost, or two refunds name one key of one commit; nil
// otherwise. Refunds with 0 Units are valid and give nothing back.
func ValidateRefunds(refunds []algorithms.Refund) error {
	for i := range refunds {
		r := &refunds[i]
		if err := ValidateCall([]algorithms.Check{r.Check}, []algorithms.Result{r.Result}); err != nil {
			return err
		}
		if r.Check.Algorithm == algorithms.Concurrency {
			return &algorithms.ConfigError{Field: "Refund.Check.Algorithm", Reason: "is concurrency, whose slots are released (Leaser), never refunded: " + quote(r.Check.Key)}
		}
		if r.Result.Receipt == (algorithms.Receipt{}) || !r.Result.Allowed {
			return &algorithms.ConfigError{Field: "Refund.Result", Reason: "carries no Receipt: the check of " + quote(r.Check.Key) + " was not allowed with a RefundWindow"}
		}
		if cost := max(r.Check.Cost, 1); r.Units < 0 || r.Units > cost {
			return &algorithms.ConfigError{Field: "Refund.Units", Reason: "must be between 0 and the check's cost " + itoa(cost) + ", got " + itoa(r.Units)}
		}
		for j := range i {
			if refunds[j].Check.Key == r.Check.Key && refunds[j].Result.Receipt == r.Result.Receipt {
				return &algorithms.ConfigError{Field: "Refund", Reason: "appears twice for one commit of " + quote(r.Check.Key)}
			}
		}
	}
	return nil
}

func quote(s string) string { return `"` + s + `"` }

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
