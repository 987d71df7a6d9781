package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/denycache"
	"github.com/redlimit/redlimit/algorithms/redisstore"
)

// The SHA1s of the scripts that settle commits: late refunds and cancels
// (the compensation of a denied call is refundSHA in refund mode).
var (
	lateRefundSHA = redis.NewScript(luaScript("refund")).Hash()
	cancelSHA     = redis.NewScript(luaScript("cancel")).Hash()
)

// settleDelays are the delays between a commit and its settling (a
// refund or a cancel) that the settle tests try: at once, about the 1 ms
// to which a fixed window's end is read from its key's TTL on the
// server's clock, and on to 4 s of a refund window of 5 s
// (redisstore.RefundWindow, and the RefundWindow of the refundable checks
// here).
var settleDelays = []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 100 * time.Millisecond, time.Second, 4 * time.Second}

// settleWindow is the RefundWindow of the refundable checks of the settle
// tests.
const settleWindow = 5 * time.Second

// stepClock is an injected clock that settleClient moves on.
type stepClock struct{ us atomic.Int64 }

func newStepClock(t time.Time) *stepClock {
	c := new(stepClock)
	c.us.Store(t.UnixMicro())
	return c
}

func (c *stepClock) Now() time.Time            { return time.UnixMicro(c.us.Load()) }
func (c *stepClock) Advance(d time.Duration)   { c.us.Add(d.Microseconds()) }
func (c *stepClock) config() redisstore.Config { return redisstore.Config{Now: c.Now} }

// settleClient is a cluster client that delays every settling of a commit
// (a compensation, a late refund, a cancel) by delay after the call that
// committed it: on the server's clock it sleeps, on an injected clock
// (clock set) it moves the clock on by delay once the first decide call
// with a commit marker has replied. With lose set, the decide call with a
// commit marker whose first key is lose runs, and its caller gets an
// error instead of its reply, as when a connection breaks in the middle
// of the reply. It counts the settling scripts that have run, and
// records, for a compensation, the time from the commit's reply to the
// compensation's reply.
type settleClient struct {
	*redis.ClusterClient
	delay  time.Duration
	clock  *stepClock
	lose   string
	tamper func() // when set, run before every settling script

	settled  atomic.Int64
	advanced atomic.Bool

	mu        sync.Mutex
	committed time.Time     // when the first decide with a commit marker replied
	longest   time.Duration // from then to the last settling's reply
}

func isSettle(sha string, args []any) bool {
	return sha == lateRefundSHA || sha == cancelSHA || (sha == refundSHA && len(args) > 1 && fmt.Sprint(args[1]) == "1")
}

func hasCommitMarker(keys []string) bool {
	for _, k := range keys {
		if strings.Contains(k, ":commit:") {
			return true
		}
	}
	return false
}

func (s *settleClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if isSettle(sha, args) {
		if s.clock == nil {
			time.Sleep(s.delay)
		}
		if s.tamper != nil {
			s.tamper()
		}
		cmd := s.ClusterClient.EvalSha(ctx, sha, keys, args...)
		s.settled.Add(1)
		s.mu.Lock()
		s.longest = max(s.longest, time.Since(s.committed))
		s.mu.Unlock()
		return cmd
	}
	if !hasCommitMarker(keys) {
		return s.ClusterClient.EvalSha(ctx, sha, keys, args...)
	}
	var cmd *redis.Cmd
	if s.lose != "" && keys[0] == s.lose {
		s.ClusterClient.EvalSha(context.WithoutCancel(ctx), sha, keys, args...)
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(errors.New("settleClient: connection reset in the middle of the reply"))
	} else {
		cmd = s.ClusterClient.EvalSha(ctx, sha, keys, args...)
	}
	s.mu.Lock()
	if s.committed.IsZero() {
		s.committed = time.Now()
	}
	s.mu.Unlock()
	if s.clock != nil && s.advanced.CompareAndSwap(false, true) {
		s.clock.Advance(s.delay)
	}
	return cmd
}

// waitSettled waits, up to 10 s, until n settling scripts have run.
func (s *settleClient) waitSettled(t *testing.T, n int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.settled.Load() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d settling scripts ran within 10 s", s.settled.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tooLate skips t when the machine took so long that the commit's marker
// (a TTL of 5 s) may have expired before its settling ran: giving nothing
// back is then what the store must do.
func (s *settleClient) tooLate(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	longest := s.longest
	s.mu.Unlock()
	if s.clock == nil && longest > redisstore.RefundWindow-100*time.Millisecond {
		t.Skipf("the settling replied %v after its commit, near or past its marker's TTL of %v: the machine is too slow for this case", longest, redisstore.RefundWindow)
	}
}

// roomyLimit returns a limit of 10 per period whose current window, on the
// local clock (which the cluster's nodes share), has more than a minute
// left, so that no settle test straddles the end of a fixed window on the
// server's clock.
func roomyLimit() algorithms.Limit {
	for p := time.Hour; ; p += time.Minute {
		if left := p - time.Duration(time.Now().UnixNano()%int64(p)); left > time.Minute {
			return algorithms.Limit{Rate: 10, Period: p}
		}
	}
}

// fixedCount returns how many units the fixed window key holds under lim,
// with a check that can never fit (it consumes nothing).
func fixedCount(t *testing.T, b algorithms.Backend, key string, lim algorithms.Limit) int64 {
	t.Helper()
	res := make([]algorithms.Result, 1)
	if err := b.Allow(context.Background(), []algorithms.Check{{Key: key, Algorithm: algorithms.FixedWindow, Limit: lim, Cost: lim.Rate + 1}}, res); err != nil {
		t.Fatal(err)
	}
	return lim.Rate - res[0].Remaining
}

// settleClocks name the two clocks of the settle tests.
var settleClocks = []string{"server", "injected"}

// newSettleClock returns the clock named name: nil for the server's, else
// an injected clock in the middle of the current hour.
func newSettleClock(name string) *stepClock {
	if name == "server" {
		return nil
	}
	return newStepClock(midHour()())
}

// settleStore returns a Store on c with clock (nil: the server's), whose
// OnRefundError fails t.
func settleStore(t *testing.T, c redis.Scripter, clock *stepClock) *redisstore.Store {
	t.Helper()
	cfg := redisstore.Config{}
	if clock != nil {
		cfg = clock.config()
	}
	cfg.OnRefundError = func(err error) { t.Errorf("OnRefundError(%v)", err) }
	b, err := redisstore.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testFixedWindowSettles: a fixed window's commit on a cluster, given back
// by a compensation (a call spanning slots that another slot denied), a
// late refund (charge after the response) or a cancel (a part whose reply
// was lost), at every delay of settleDelays within the refund window,
// leaves the key's count exactly where it was before the commit, on the
// server's clock and on an injected one. Before, on the server's clock, a
// compensation or cancel that ran more than about 1 ms after its commit
// deleted the commit marker and gave nothing back: the fixed window's
// refund read the key's end from its TTL as if the refund ran at the
// commit's instant.
func testFixedWindowSettles(t *testing.T, client *redis.ClusterClient) {
	ctx := context.Background()
	for _, name := range settleClocks {
		lim := roomyLimit()
		if name != "server" {
			lim = algorithms.PerHour(10)
		}
		for _, delay := range settleDelays {
			// A call spanning slots that the IP's slot denies: the
			// route's commit is compensated.
			t.Run(fmt.Sprintf("Compensation/%s/%v", name, delay), func(t *testing.T) {
				t.Parallel()
				clock := newSettleClock(name)
				store := func(t *testing.T, c redis.Scripter) *redisstore.Store { return settleStore(t, c, clock) }
				p := clusterPrefix(t)
				route := algorithms.Check{Key: p + "route:{GET /}", Algorithm: algorithms.FixedWindow, Limit: lim}
				ip := algorithms.Check{Key: p + "ip:{exhausted}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1)}
				requireSlots(t, route.Key, ip.Key)
				plain := store(t, client)
				sc := &settleClient{ClusterClient: client, delay: delay, clock: clock}
				b := store(t, sc)
				one := make([]algorithms.Result, 1)
				for range 3 {
					if err := plain.Allow(ctx, []algorithms.Check{route}, one); err != nil || !one[0].Allowed {
						t.Fatal(one, err)
					}
				}
				if err := plain.Allow(ctx, []algorithms.Check{ip}, one); err != nil || !one[0].Allowed {
					t.Fatal(one, err)
				}
				res := make([]algorithms.Result, 2)
				if err := b.Allow(ctx, []algorithms.Check{ip, route}, res); err != nil {
					t.Fatal(err)
				}
				if res[0].Allowed || !res[1].Allowed {
					t.Fatalf("Allow(exhausted IP, route) = %+v, want the IP denied and the route's slot committed", res)
				}
				sc.tooLate(t)
				if sc.settled.Load() != 1 {
					t.Fatalf("%d compensations ran, want 1", sc.settled.Load())
				}
				if got := fixedCount(t, plain, route.Key, lim); got != 3 {
					t.Errorf("route holds %d units after a compensation %v after its commit, want 3 (as before the call)", got, delay)
				}
				if res[1].Remaining != 7 {
					t.Errorf("route's Result after the compensation: Remaining %d, want 7", res[1].Remaining)
				}
			})

			// A refundable call, in one slot and spanning two, refunded
			// in full by Store.Refund after delay.
			for _, spanning := range []bool{false, true} {
				t.Run(fmt.Sprintf("LateRefund/%s/spanning=%v/%v", name, spanning, delay), func(t *testing.T) {
					t.Parallel()
					clock := newSettleClock(name)
					store := func(t *testing.T, c redis.Scripter) *redisstore.Store { return settleStore(t, c, clock) }
					p := clusterPrefix(t)
					route := algorithms.Check{Key: p + "route:{GET /}", Algorithm: algorithms.FixedWindow, Limit: lim, RefundWindow: settleWindow}
					ip := algorithms.Check{Key: p + "ip:{fresh}", Algorithm: algorithms.FixedWindow, Limit: lim, RefundWindow: settleWindow}
					requireSlots(t, route.Key, ip.Key)
					b := store(t, client)
					one := make([]algorithms.Result, 1)
					for range 3 {
						if err := b.Allow(ctx, []algorithms.Check{{Key: route.Key, Algorithm: route.Algorithm, Limit: lim}}, one); err != nil || !one[0].Allowed {
							t.Fatal(one, err)
						}
					}
					checks := []algorithms.Check{route}
					if spanning {
						checks = append(checks, ip)
					}
					res := make([]algorithms.Result, len(checks))
					start := time.Now()
					if err := b.Allow(ctx, checks, res); err != nil || !allAllowed(res) {
						t.Fatal(res, err)
					}
					if clock != nil {
						clock.Advance(delay)
					} else {
						time.Sleep(delay)
					}
					refunds := make([]algorithms.Refund, len(checks))
					for i := range checks {
						refunds[i] = algorithms.Refund{Check: checks[i], Result: res[i], Units: 1}
					}
					err := b.Refund(ctx, refunds)
					if errors.Is(err, algorithms.ErrNotRefunded) && time.Since(start) > settleWindow-100*time.Millisecond {
						t.Skipf("the refund came %v after its commit, near or past its marker's TTL of %v: the machine is too slow for this case", time.Since(start), settleWindow)
					}
					if err != nil {
						t.Fatalf("Refund %v after the commit: %v", delay, err)
					}
					if got := fixedCount(t, b, route.Key, lim); got != 3 {
						t.Errorf("route holds %d units after a refund %v after its commit, want 3 (as before the call)", got, delay)
					}
					if spanning {
						if got := fixedCount(t, b, ip.Key, lim); got != 0 {
							t.Errorf("IP holds %d units after a refund %v after its commit, want 0", got, delay)
						}
					}
				})
			}

			// A call spanning slots whose route part committed but whose
			// reply was lost: the IP's commit is compensated in the
			// background, the route's part cancelled (lua/cancel.lua).
			// Both run within refundTimeout (2 s) of the call: the
			// delays of 4 s and more do not apply.
			if delay >= 2*time.Second {
				continue
			}
			t.Run(fmt.Sprintf("Cancel/%s/%v", name, delay), func(t *testing.T) {
				t.Parallel()
				clock := newSettleClock(name)
				store := func(t *testing.T, c redis.Scripter) *redisstore.Store { return settleStore(t, c, clock) }
				p := clusterPrefix(t)
				route := algorithms.Check{Key: p + "route:{GET /}", Algorithm: algorithms.FixedWindow, Limit: lim}
				ip := algorithms.Check{Key: p + "ip:{fresh}", Algorithm: algorithms.FixedWindow, Limit: lim}
				requireSlots(t, route.Key, ip.Key)
				plain := store(t, client)
				sc := &settleClient{ClusterClient: client, delay: delay, clock: clock, lose: route.Key}
				b := store(t, sc)
				one := make([]algorithms.Result, 1)
				for range 3 {
					if err := plain.Allow(ctx, []algorithms.Check{route}, one); err != nil || !one[0].Allowed {
						t.Fatal(one, err)
					}
				}
				var cancels, gave atomic.Int64
				redisstore.OnCancel(b, func(g bool) {
					cancels.Add(1)
					if g {
						gave.Add(1)
					}
				})
				if err := b.Allow(ctx, []algorithms.Check{ip, route}, make([]algorithms.Result, 2)); err == nil {
					t.Fatal("Allow with the route's reply lost: no error")
				}
				sc.waitSettled(t, 2) // the IP's compensation and the route's cancel
				for deadline := time.Now().Add(5 * time.Second); cancels.Load() == 0 && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
				if cancels.Load() != 1 || gave.Load() != 1 {
					t.Fatalf("%d cancels delivered, %d of them gave units back; want 1 and 1", cancels.Load(), gave.Load())
				}
				if got := fixedCount(t, plain, route.Key, lim); got != 3 {
					t.Errorf("route holds %d units after its part was cancelled %v after its commit, want 3 (as before the call)", got, delay)
				}
				if got := fixedCount(t, plain, ip.Key, lim); got != 0 {
					t.Errorf("IP holds %d units after its part was refunded %v after its commit, want 0", got, delay)
				}
			})
		}
	}

	// A compensation or cancel that finds the route's count with another
	// TTL than its commit's window (here a PEXPIRE of 3 h) cannot tell the
	// commit's units and gives nothing back: OnRefundError hears of it,
	// with an error matching ErrKeyState that names the route. Before, it
	// was silent.
	for _, lose := range []bool{false, true} {
		t.Run(fmt.Sprintf("NotGiven/cancel=%v", lose), func(t *testing.T) {
			t.Parallel()
			lim := roomyLimit()
			p := clusterPrefix(t)
			route := algorithms.Check{Key: p + "route:{GET /}", Algorithm: algorithms.FixedWindow, Limit: lim}
			ip := algorithms.Check{Key: p + "ip:{exhausted}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1)}
			requireSlots(t, route.Key, ip.Key)
			sc := &settleClient{ClusterClient: client, tamper: func() { client.PExpire(ctx, route.Key, 3*time.Hour) }}
			reported := make(chan error, 4)
			b, err := redisstore.New(sc, redisstore.Config{OnRefundError: func(err error) { reported <- err }})
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := redisstore.New(client, redisstore.Config{})
			if !lose {
				// the IP denies: the route's commit is compensated
				if err := plain.Allow(ctx, []algorithms.Check{ip}, make([]algorithms.Result, 1)); err != nil {
					t.Fatal(err)
				}
			} else {
				// the route's reply is lost: its part is cancelled, the
				// IP's compensated (the IP's count has its own TTL)
				ip.Key = p + "ip:{fresh}"
				sc.lose = route.Key
			}
			err = b.Allow(ctx, []algorithms.Check{ip, route}, make([]algorithms.Result, 2))
			if (err != nil) != lose {
				t.Fatalf("Allow = %v", err)
			}
			select {
			case err := <-reported:
				var be *algorithms.BackendError
				if !errors.Is(err, algorithms.ErrKeyState) || !errors.As(err, &be) || len(be.Keys) != 1 || be.Keys[0] != route.Key {
					t.Errorf("OnRefundError(%v), want a BackendError matching ErrKeyState naming %s", err, route.Key)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a settling that gave nothing back was not reported within 5 s")
			}
			if got := fixedCount(t, plain, route.Key, lim); got != 1 {
				t.Errorf("route holds %d units, want the 1 the settling could not give back", got)
			}
			if lose {
				sc.waitSettled(t, 2)
				if got := fixedCount(t, plain, ip.Key, lim); got != 0 {
					t.Errorf("IP holds %d units, want 0: its compensation gave back", got)
				}
			}
			select {
			case err := <-reported:
				t.Errorf("OnRefundError(%v): one report only, of the route", err)
			default:
			}
		})
	}

	// The deny cache: instance B's call from a client over its own limit
	// commits the route's last unit, whose compensation is held for
	// 10 ms; meanwhile instance A, with a deny cache, sees the route
	// denied (provisionally). Once the compensation has landed, the route
	// holds a unit again and A answers a new client as it would without
	// the cache. Before, on the server's clock, the compensation gave
	// nothing back and the route stayed at 10 of 10 until its window
	// ended, denying every new client.
	for _, name := range settleClocks {
		t.Run("DenyCache/"+name, func(t *testing.T) {
			t.Parallel()
			clock := newSettleClock(name)
			lim := roomyLimit()
			cfg := redisstore.Config{}
			if clock != nil {
				lim, cfg = algorithms.PerHour(10), clock.config()
			}
			p := clusterPrefix(t)
			route := algorithms.Check{Key: p + "route:{GET /}", Algorithm: algorithms.FixedWindow, Limit: lim}
			ipCheck := func(name string) algorithms.Check {
				return algorithms.Check{Key: p + "ip:{" + name + "}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(1)}
			}
			requireSlots(t, route.Key, ipCheck("exhausted").Key)
			held := &heldRefunds{ClusterClient: client, arrived: make(chan struct{}, 1), release: make(chan struct{})}
			instB, _ := redisstore.New(held, cfg)
			plain, _ := redisstore.New(client, cfg)
			instA, _ := denycache.New(plain, denycache.Config{})
			one := make([]algorithms.Result, 1)
			for range 9 {
				if err := plain.Allow(ctx, []algorithms.Check{route}, one); err != nil || !one[0].Allowed {
					t.Fatal(one, err)
				}
			}
			if err := plain.Allow(ctx, []algorithms.Check{ipCheck("exhausted")}, one); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				done <- instB.Allow(ctx, []algorithms.Check{ipCheck("exhausted"), route}, make([]algorithms.Result, 2))
			}()
			<-held.arrived
			res := make([]algorithms.Result, 2)
			if err := instA.Allow(ctx, []algorithms.Check{ipCheck("new1"), route}, res); err != nil {
				t.Fatal(err)
			}
			if res[1].Allowed {
				t.Fatalf("route allowed while its last unit was committed: %+v", res)
			}
			time.Sleep(10 * time.Millisecond)
			close(held.release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := fixedCount(t, plain, route.Key, lim); got != 9 {
				t.Fatalf("route holds %d units after the compensation, want 9", got)
			}
			if err := instA.Allow(ctx, []algorithms.Check{ipCheck("new2"), route}, res); err != nil {
				t.Fatal(err)
			}
			if !allAllowed(res) {
				t.Errorf("instance with a deny cache: Allow(new client, route holding 9 of 10) = %+v, want allowed", res)
			}
		})
	}
}

// clusterPrefix is redistest.Prefix without the characters of a subtest's
// name that would make a hash tag of it.
func clusterPrefix(t *testing.T) string {
	return strings.NewReplacer("{", "(", "}", ")").Replace(fmt.Sprintf("t%d:%s:", time.Now().UnixNano()%1e9, t.Name()))
}
