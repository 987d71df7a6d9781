package redlimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// defaultRefundWindow validates Config.RefundWindow and sets its default.
func defaultRefundWindow(w *time.Duration) error {
	switch {
	case *w < 0 || *w > 24*time.Hour:
		return &algorithms.ConfigError{Field: "Config.RefundWindow", Reason: "must be between 0 (1 minute) and 24h, got " + w.String()}
	case *w == 0:
		*w = time.Minute
	}
	return nil
}

// Cost is what a request turned out to cost under one rule, for
// [Limiter.Settle]: Units (0 or more) of the rule named Rule.
type Cost struct {
	Rule  string
	Units int64
}

// Settle ends the allowed decision d once the work it admitted is done:
// it releases the slots of its concurrency rules (see Decision.KeepAlive)
// and charges its refundable rules (Rule.Refundable) what the request
// turned out to cost. costs are keyed by rule name (Cost.Rule), in any
// order: each refundable rule named gets back what d reserved for it
// (RuleDecision.Cost) less Cost.Units. A refundable rule that no Cost
// names keeps its whole reservation. This is "charge after the
// response": the decision reserved the full cost, atomically, so a key
// over its limit was denied up front and requests in flight count;
// Settle, a second atomic call to the backend, gives back what was not
// used. Settle(ctx, d) with no costs releases d's slots alone.
//
// A Cost naming no rule of e, a rule that is not refundable, or a rule
// another Cost names too, is an *[algorithms.ConfigError] (a programmer
// error): nothing is given back, and the slots are released all the
// same. Units below 0 or above the reservation are an error for their
// rule, which keeps its whole reservation: nothing is ever charged beyond
// what the decision checked, and a bad cost never gives back more than
// was taken. The other rules are settled all the same.
//
// A decision is settled at most once: its slots are released once (a
// clone shares them), and the backend gives back a reservation only once
// (a second Settle gives nothing back, and its error matches
// [algorithms.ErrNotRefunded]), and not after Config.RefundWindow. A
// decision that charged nothing (denied, failed, or decided by no
// backend) has nothing to settle: Settle returns nil. The release and
// the refund go to the backend that decided d (the primary, or the
// fallback), under Config.Timeout, whatever ctx's cancellation says for
// the release; the deny cache of e forgets the keys' denials. Errors are
// logged (Warn) and returned, joined; the error policy does not apply.
func (e *Limiter) Settle(ctx context.Context, d *Decision, costs ...Cost) error {
	var errs []error
	if err := d.release(ctx); err != nil {
		errs = append(errs, err)
	}
	if len(d.Rules) != len(e.rules) {
		return errors.Join(append(errs, &algorithms.ConfigError{Field: "Decision", Reason: "is not one of this Limiter's: it has " + strconv.Itoa(len(d.Rules)) + " rules, the Limiter " + strconv.Itoa(len(e.rules))})...)
	}
	valid := len(errs)
	for j := range costs {
		c := &costs[j]
		i := e.ruleIndex(c.Rule, -1)
		switch {
		case i < 0:
			errs = append(errs, &algorithms.ConfigError{Rule: c.Rule, Field: "Cost.Rule", Reason: "names no rule of the Limiter (its rules: " + e.names() + ")"})
		case !e.rules[i].Refundable:
			errs = append(errs, &algorithms.ConfigError{Rule: c.Rule, Field: "Cost.Rule", Reason: "names a rule that is not Refundable: it keeps what it charged"})
		}
		for k := range costs[:j] {
			if costs[k].Rule == c.Rule {
				errs = append(errs, &algorithms.ConfigError{Rule: c.Rule, Field: "Cost.Rule", Reason: "is named by two Costs of one call"})
				break
			}
		}
	}
	if len(errs) == valid && d.Allowed && d.Source != SourceNone {
		errs = e.settle(ctx, d, costs, errs)
	}
	err := errors.Join(errs...)
	if err != nil {
		e.s.logSettleError(err)
	}
	return err
}

// settle gives back to each refundable rule of d named in costs what it
// reserved less its cost, appending the errors to errs.
func (e *Limiter) settle(ctx context.Context, d *Decision, costs []Cost, errs []error) []error {
	var refunds []algorithms.Refund
	for j := range costs {
		i := e.ruleIndex(costs[j].Rule, -1)
		rd := &d.Rules[i]
		if rd.Key == "" || !rd.Evaluated || !rd.Result.Allowed || rd.Result.Receipt == (algorithms.Receipt{}) {
			continue
		}
		c := costs[j].Units
		if c < 0 || c > rd.Cost {
			errs = append(errs, &algorithms.ConfigError{Rule: rd.Name, Field: "Cost.Units", Reason: "must be between 0 and the " + strconv.FormatInt(rd.Cost, 10) + " units reserved, got " + strconv.FormatInt(c, 10)})
			continue
		}
		if n := rd.Cost - c; n > 0 {
			refunds = append(refunds, algorithms.Refund{
				Check:  algorithms.Check{Key: rd.Key, Algorithm: rd.Algorithm, Limit: rd.Limit, Cost: rd.Cost, RefundWindow: e.s.refundWindow},
				Result: rd.Result,
				Units:  n,
			})
		}
	}
	if len(refunds) > 0 {
		if err := e.s.refund(ctx, d.Source, refunds); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// logSettleError logs err at Warn, at most once a second, with the number
// of settle errors since the last line.
func (s *shared) logSettleError(err error) {
	if n, ok := s.settleLog.due(); ok {
		s.logger.Warn("redlimit: charges not settled", "err", err, "errors", n)
	}
}

// refund asks the backend that decided (src) to make refunds, under the
// timeout.
func (s *shared) refund(ctx context.Context, src Source, refunds []algorithms.Refund) error {
	b := s.backend
	if src == SourceFallback {
		b = s.fallback
		if s.instances > 1 {
			// the fallback charged the share (onFallback): the refund
			// describes the same limit, or a bucket reads it as a limit
			// changed (its debt cut to the rule's capacity) and gives back
			// the rule's emission interval instead of the share's
			for i := range refunds {
				refunds[i].Check.Limit = share(refunds[i].Check.Limit, s.instances)
			}
		}
	}
	r, ok := b.(algorithms.Refunder)
	if !ok {
		return engineErr(fmt.Errorf("%w: the backend (%T) cannot refund (it is no algorithms.Refunder)", errors.ErrUnsupported, b))
	}
	if s.timeout > 0 && b == s.backend {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	return s.sideCall(ctx, b, func(ctx context.Context) error { return r.Refund(ctx, refunds) })
}

// checkRefunder refuses a Refundable rule whose backend, or fallback,
// cannot make refunds: without it every Settle of the rule would fail
// and the charges would stay, found only at request time.
func (s *shared) checkRefunder(r Rule) error {
	if !r.Refundable {
		return nil
	}
	if s.supports(func(b algorithms.Backend) bool { _, ok := b.(algorithms.Refunder); return ok }) {
		return nil
	}
	return &algorithms.ConfigError{Rule: r.Name, Field: "Refundable", Reason: "needs a backend (and a fallback) that can give charges back: an algorithms.Refunder"}
}
