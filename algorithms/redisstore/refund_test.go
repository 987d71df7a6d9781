package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/internal/redistest"
)

// resend is a go-redis hook that sends every EVALSHA of one script twice,
// as go-redis does when the reply to the first was lost: the server runs
// it twice, the client reads the second reply.
type resend struct{ sha string }

func (resend) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h resend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 1 && cmd.Name() == "evalsha" && args[1] == h.sha {
			_ = next(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

func (resend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// resendClient returns a client of a real redis-server on which every
// script is loaded (EVALSHA from the start) and the script src is sent
// twice each time it runs (resend).
func resendClient(t *testing.T, src string) *redis.Client {
	t.Helper()
	client := redistest.Require(t).Client(t)
	for _, s := range redisstore.Scripts() {
		if err := client.ScriptLoad(context.Background(), s).Err(); err != nil {
			t.Fatal(err)
		}
	}
	client.AddHook(resend{sha: redis.NewScript(src).Hash()})
	return client
}

// TestRefundResent: on a real redis-server, a refund that reaches the
// server twice (a lost reply, a retry) gives back once, on every
// algorithm; the caller then hears ErrNotRefunded, the reply of the
// second run.
func TestRefundResent(t *testing.T) {
	ctx := context.Background()
	client := resendClient(t, luaScript("refund"))
	now := time.Unix(1_700_000_000, 0)
	b, err := redisstore.New(client, redisstore.Config{Now: func() time.Time { return now }, Pipelines: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, alg := range refundable {
		check := algorithms.Check{Key: redistest.Prefix(t) + alg.String() + ":{k}", Algorithm: alg, Limit: algorithms.PerHour(10), Cost: 4, RefundWindow: time.Minute}
		res := make([]algorithms.Result, 1)
		if err := b.Allow(ctx, []algorithms.Check{check}, res); err != nil || !res[0].Allowed {
			t.Fatalf("%v: Allow = %+v, %v", alg, res[0], err)
		}
		err := b.Refund(ctx, []algorithms.Refund{{Check: check, Result: res[0], Units: 2}})
		if !errors.Is(err, algorithms.ErrNotRefunded) {
			t.Fatalf("%v: a refund run twice = %v, want ErrNotRefunded from the second run", alg, err)
		}
		peek := check
		peek.Cost, peek.RefundWindow = 11, 0
		if err := b.Allow(ctx, []algorithms.Check{peek}, res); err != nil {
			t.Fatal(err)
		}
		if res[0].Remaining != 8 {
			t.Fatalf("%v: after a refund of 2 of 4 run twice: remaining %d, want 8", alg, res[0].Remaining)
		}
	}
}

// refundable lists the algorithms whose charges can be refunded: all but
// concurrency, whose slots are released instead.
var refundable = slices.DeleteFunc(slices.Clone(algorithms.Algorithms), func(a algorithms.Algorithm) bool {
	return a == algorithms.Concurrency
})

// TestConcurrencyResent: on a real redis-server, an acquisition that
// reaches the server twice (a lost reply, a retry) takes its slots once:
// a lease id names its slots, so the second run finds them held by the
// same lease. Released, they are all free again.
func TestConcurrencyResent(t *testing.T) {
	ctx := context.Background()
	client := resendClient(t, luaScript("one_concurrency"))
	b, err := redisstore.New(client, redisstore.Config{Pipelines: -1})
	if err != nil {
		t.Fatal(err)
	}
	limit := algorithms.InFlight(3, time.Minute)
	check := algorithms.Check{Key: redistest.Prefix(t) + "slots:{k}", Algorithm: algorithms.Concurrency, Limit: limit, Cost: 2, Lease: contract.NewLease()}
	res := make([]algorithms.Result, 1)
	if err := b.Allow(ctx, []algorithms.Check{check}, res); err != nil || !res[0].Allowed || res[0].Remaining != 1 {
		t.Fatalf("an acquisition of 2 of 3 slots run twice: %+v, %v; want allowed, 1 slot left", res[0], err)
	}
	if n, err := client.ZCard(ctx, check.Key).Result(); err != nil || n != 2 {
		t.Fatalf("%d members held, %v; want 2", n, err)
	}
	if err := b.Release(ctx, []algorithms.Lease{{Key: check.Key, ID: check.Lease, Cost: 2, Period: limit.Period}}); err != nil {
		t.Fatal(err)
	}
	if n, err := client.Exists(ctx, check.Key).Result(); err != nil || n != 0 {
		t.Fatalf("after the release the key exists (%d, %v): want every slot free", n, err)
	}
}

// TestRefundNotGiven: on a real redis-server and the server's clock, a
// fixed window's count names its window by its key's TTL; a refund that
// finds that TTL changed since its commit, while the commit's
// window is current, cannot tell the commit's units and gives nothing
// back. Refund reports it: an error matching ErrKeyState that names the
// key (before, it returned nil, the units silently kept). The marker is
// taken all the same: a second refund gives nothing (ErrNotRefunded).
func TestRefundNotGiven(t *testing.T) {
	ctx := context.Background()
	client := redistest.Require(t).Client(t)
	b, err := redisstore.New(client, redisstore.Config{Pipelines: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		tamper func(key string) error
	}{
		{"PEXPIRE", func(key string) error { return client.PExpire(ctx, key, 3*time.Hour).Err() }},
		{"RESTORE a second early", func(key string) error {
			// as a MIGRATE to a node whose clock is a second ahead
			// leaves it: the TTL sent relative, turned into an instant
			// on the other clock
			ttl, err := client.PTTL(ctx, key).Result()
			if err != nil {
				return err
			}
			v, err := client.Dump(ctx, key).Result()
			if err != nil {
				return err
			}
			return client.RestoreReplace(ctx, key, ttl-time.Second, v).Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := roomyLimit()
			check := algorithms.Check{Key: redistest.Prefix(t) + "{k}", Algorithm: algorithms.FixedWindow, Limit: lim, Cost: 2, RefundWindow: time.Minute}
			res := make([]algorithms.Result, 1)
			if err := b.Allow(ctx, []algorithms.Check{check}, res); err != nil || !res[0].Allowed {
				t.Fatalf("Allow = %+v, %v", res[0], err)
			}
			if err := tc.tamper(check.Key); err != nil {
				t.Fatal(err)
			}
			refund := []algorithms.Refund{{Check: check, Result: res[0], Units: 2}}
			err := b.Refund(ctx, refund)
			var be *algorithms.BackendError
			if !errors.Is(err, algorithms.ErrKeyState) || !errors.As(err, &be) || !slices.Equal(be.Keys, []string{check.Key}) {
				t.Fatalf("Refund after %s of the key = %v, want a BackendError matching ErrKeyState naming %s", tc.name, err, check.Key)
			}
			if got := fixedCount(t, b, check.Key, lim); got != 2 {
				t.Errorf("the key holds %d units, want the 2 the refund could not give back", got)
			}
			if err := b.Refund(ctx, refund); !errors.Is(err, algorithms.ErrNotRefunded) {
				t.Errorf("Refund again = %v, want ErrNotRefunded", err)
			}
		})
	}
}
