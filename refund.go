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

// Refund gives back n units to each refundable rule (Rule.Refundable)
// that d charged: for key-first callers that reserve with AllowN and
// learn afterwards what the work cost ("refund on failure"). n must be
// between 0 and what each such rule reserved (RuleDecision.Cost). It is
// Settle with every refundable rule's cost its reservation less n.
func (e *Limiter) Refund(ctx context.Context, d *Decision, n int64) error {
	return e.settle(ctx, d, func(_ int, rd *RuleDecision) (int64, error) {
		if n < 0 || n > rd.Cost {
			return 0, &algorithms.ConfigError{Rule: rd.Name, Field: "Refund", Reason: "must give back between 0 and the " + strconv.FormatInt(rd.Cost, 10) + " units reserved, got " + strconv.FormatInt(n, 10)}
		}
		return n, nil
	})
}

// Settle charges the refundable rules (Rule.Refundable) of the allowed
// decision d what the request turned out to cost: costs holds one cost
// per rule of e, in rule order, and each refundable rule that d charged
// gets back what it reserved (RuleDecision.Cost) less costs[i]. The costs
// of the other rules are ignored. This is "charge after the response":
// the decision reserved the full cost, atomically, so a key over its
// limit was denied up front and requests in flight count; Settle, a
// second atomic call to the backend, gives back what was not used.
//
// A cost below 0 or above the reservation is an error for its rule,
// which keeps its whole reservation: nothing is ever charged beyond what
// the decision checked, and a bad cost never gives back more than was
// taken. The other rules are settled all the same.
//
// A decision is settled at most once: the backend gives back a
// reservation only once (a second Settle or Refund of d gives nothing
// back, and its error matches [algorithms.ErrNotRefunded]), and not
// after Config.RefundWindow. A decision that charged nothing (denied,
// failed, or decided by no backend) has nothing to settle: Settle returns
// nil. The refund goes to the backend that decided d (the primary, or
// the fallback), under Config.Timeout; the deny cache of e forgets the
// keys' denials. Errors are logged (Warn) and returned, joined; the
// error policy does not apply.
func (e *Limiter) Settle(ctx context.Context, d *Decision, costs []int64) error {
	if len(costs) != len(e.rules) {
		return &algorithms.ConfigError{Field: "Settle", Reason: "takes one cost per rule, got " + strconv.Itoa(len(costs)) + " for " + strconv.Itoa(len(e.rules))}
	}
	return e.settle(ctx, d, func(i int, rd *RuleDecision) (int64, error) {
		c := costs[i]
		if c < 0 || c > rd.Cost {
			return 0, &algorithms.ConfigError{Rule: rd.Name, Field: "cost", Reason: "must be between 0 and the " + strconv.FormatInt(rd.Cost, 10) + " units reserved, got " + strconv.FormatInt(c, 10)}
		}
		return rd.Cost - c, nil
	})
}

// settle gives back units(i, rd) to each refundable rule rd (rule i)
// that d charged.
func (e *Limiter) settle(ctx context.Context, d *Decision, units func(i int, rd *RuleDecision) (int64, error)) error {
	if len(d.Rules) != len(e.rules) {
		return &algorithms.ConfigError{Field: "Decision", Reason: "is not one of this Limiter's: it has " + strconv.Itoa(len(d.Rules)) + " rules, the Limiter " + strconv.Itoa(len(e.rules))}
	}
	if !d.Allowed || d.Source == SourceNone {
		return nil
	}
	var errs []error
	var refunds []algorithms.Refund
	for i := range d.Rules {
		rd := &d.Rules[i]
		if !e.rules[i].Refundable || rd.Key == "" || !rd.Evaluated || !rd.Result.Allowed || rd.Result.Receipt == (algorithms.Receipt{}) {
			continue
		}
		n, err := units(i, rd)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n > 0 {
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
	err := errors.Join(errs...)
	if err != nil {
		e.s.logSettleError(err)
	}
	return err
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
