package rueidisclient_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/algorithms/redisstore/internal/batching"
	"github.com/redlimit/redlimit/algorithms/redisstore/rueidisclient"
	"github.com/redlimit/redlimit/internal/contract"
	"github.com/redlimit/redlimit/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// dial returns a rueidis client of srv as the package doc recommends
// (DisableAutoPipelining), closed when t ends.
func dial(t testing.TB, srv *redistest.Server) rueidis.Client {
	t.Helper()
	return dialWith(t, srv, rueidis.ClientOption{DisableAutoPipelining: true})
}

func dialWith(t testing.TB, srv *redistest.Server, o rueidis.ClientOption) rueidis.Client {
	t.Helper()
	o.InitAddress, o.DisableCache = []string{srv.Addr}, true
	rc, err := rueidis.NewClient(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return rc
}

func newClient(t testing.TB, srv *redistest.Server) *rueidisclient.Client {
	t.Helper()
	c, err := rueidisclient.New(dial(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConformance plays every vector of testdata/vectors on a store on
// rueidis: it must answer as the vectors say, as the store on go-redis
// does.
func TestConformance(t *testing.T) {
	srv := redistest.Require(t)
	c := newClient(t, srv)
	for _, sc := range backendtest.LoadVectors(t) {
		t.Run(sc.File+"/"+sc.Name, func(t *testing.T) {
			clock := &backendtest.Clock{T: backendtest.T0}
			b, err := redisstore.New(rueidisclient.Persisting(c), redisstore.Config{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			backendtest.Play(t, &backendtest.Harness{Backend: b, Clock: clock, Prefix: redistest.Prefix(t)}, sc, false)
		})
	}
}

// TestSameAsGoRedis: random workloads of one to three rules (every
// algorithm, costs up to capacity+1, time going forward and back) answer
// alike, result for result, on go-redis and on rueidis. Time is scaled by
// 1000 (the workload in ms instead of µs), as in redisstore's cluster
// test, so that no TTL a script sets is short enough to run out before
// its PERSIST on a loaded machine.
func TestSameAsGoRedis(t *testing.T) {
	srv := redistest.Require(t)
	c := newClient(t, srv)
	for seed := range uint64(6) {
		clock := &backendtest.Clock{}
		onRueidis, err := redisstore.New(rueidisclient.Persisting(c), redisstore.Config{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		onGoRedis, err := redisstore.New(backendtest.Persisting{Client: srv.Client(t)}, redisstore.Config{Now: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		prefix := redistest.Prefix(t)
		for i, call := range backendtest.RandomWorkload(seed, 200) {
			call = backendtest.Scaled(call, 1000)
			got := backendtest.Run(t, onRueidis, clock, prefix+"rueidis:", call)
			want := backendtest.Run(t, onGoRedis, clock, prefix+"goredis:", call)
			for j := range want {
				if got[j] != want[j] {
					t.Fatalf("seed %d, call %d, check %d (%+v): rueidis %s, go-redis %s", seed, i, j, call.Checks[j], backendtest.FormatResult(got[j]), backendtest.FormatResult(want[j]))
				}
			}
		}
	}
}

// TestConcurrentExactness: 64 goroutines on two stores, one on rueidis and
// one on go-redis (two application instances), hammer one key with a
// limit of 100 on the server's clock: exactly 100 requests are allowed,
// for every algorithm, on a rueidis client with and without its own
// auto-pipelining. The window algorithms get a fixed clock in the middle
// of the hour, so the test cannot straddle a window's end.
func TestConcurrentExactness(t *testing.T) {
	srv := redistest.Require(t)
	gr := srv.Client(t)
	prefix := redistest.Prefix(t)
	for _, auto := range []bool{false, true} {
		c, err := rueidisclient.New(dialWith(t, srv, rueidis.ClientOption{DisableAutoPipelining: !auto}))
		if err != nil {
			t.Fatal(err)
		}
		for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingLog, algorithms.SlidingWindow, algorithms.TokenBucket, algorithms.GCRA} {
			t.Run(fmt.Sprintf("%v/autopipelining=%v", alg, auto), func(t *testing.T) {
				var cfg redisstore.Config
				if alg == algorithms.FixedWindow || alg == algorithms.SlidingWindow {
					mid := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
					cfg.Now = func() time.Time { return mid }
				}
				backends := make([]algorithms.Backend, 2)
				for i, client := range []redis.Scripter{c, gr} {
					b, err := redisstore.New(client, cfg)
					if err != nil {
						t.Fatal(err)
					}
					backends[i] = b
				}
				check := algorithms.Check{Key: prefix + fmt.Sprint(auto) + alg.String() + ":{hot}", Algorithm: alg, Limit: algorithms.PerHour(100)}
				if allowed, denied := backendtest.HammerTwo(t, backends, check); allowed != 100 || denied != 220 {
					t.Fatalf("allowed %d, denied %d of 320; want exactly 100 allowed", allowed, denied)
				}
			})
		}
	}
}

// TestScriptFlush: SCRIPT FLUSH between checks (a restart or a failover
// looks the same) does not surface: the NOSCRIPT reply reaches go-redis's
// Script.Run as a redis.Error, which sends the script itself.
func TestScriptFlush(t *testing.T) {
	srv := redistest.Require(t)
	b, err := redisstore.New(newClient(t, srv), redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	check := []algorithms.Check{{Key: redistest.Prefix(t) + "{k}", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10)}}
	res := make([]algorithms.Result, 1)
	gr := srv.Client(t)
	for i := range 4 {
		if err := gr.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Allow(context.Background(), check, res); err != nil {
			t.Fatalf("check %d after SCRIPT FLUSH: %v", i, err)
		}
		if !res[0].Allowed || res[0].Remaining != int64(9-i) {
			t.Fatalf("check %d: %s, want allowed with %d left", i, backendtest.FormatResult(res[0]), 9-i)
		}
	}
}

// TestKeyState: a key holding another type is the key's error
// (algorithms.ErrKeyState, naming the key), as on go-redis, not the
// server's.
func TestKeyState(t *testing.T) {
	srv := redistest.Require(t)
	c := newClient(t, srv)
	b, err := redisstore.New(c, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	key := redistest.Prefix(t) + "{list}"
	if err := srv.Client(t).RPush(context.Background(), key, "x").Err(); err != nil {
		t.Fatal(err)
	}
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.TokenBucket, algorithms.GCRA} {
		err := b.Allow(context.Background(), []algorithms.Check{{Key: key, Algorithm: alg, Limit: algorithms.PerHour(10)}}, make([]algorithms.Result, 1))
		var be *algorithms.BackendError
		if !errors.Is(err, algorithms.ErrKeyState) || !errors.As(err, &be) || !slices.Equal(be.Keys, []string{key}) {
			t.Errorf("%v on a list: %v, want ErrKeyState naming %q", alg, err, key)
		}
	}
}

// TestReset: Reset deletes a key's state through the adapter's DEL.
func TestReset(t *testing.T) {
	srv := redistest.Require(t)
	b, err := redisstore.New(newClient(t, srv), redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	check := []algorithms.Check{{Key: redistest.Prefix(t) + "{k}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(2)}}
	res := make([]algorithms.Result, 1)
	for range 3 {
		if err := b.Allow(context.Background(), check, res); err != nil {
			t.Fatal(err)
		}
	}
	if res[0].Allowed {
		t.Fatal("third check of 2 per hour allowed")
	}
	if err := b.Reset(context.Background(), []string{check[0].Key}); err != nil {
		t.Fatal(err)
	}
	if err := b.Allow(context.Background(), check, res); err != nil {
		t.Fatal(err)
	}
	if !res[0].Allowed || res[0].Remaining != 1 {
		t.Fatalf("after Reset: %s, want allowed with 1 left", backendtest.FormatResult(res[0]))
	}
}

// TestDeadline: on a server that stopped answering (SIGSTOP), a check
// returns by its context's deadline, and the store says it will.
func TestDeadline(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	b, err := redisstore.New(newClient(t, srv), redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !contract.TraitsOf(b).HonoursDeadline {
		t.Fatal("HonoursDeadline false on rueidis")
	}
	check := []algorithms.Check{{Key: "{k}", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10)}}
	res := make([]algorithms.Result, 1)
	if err := b.Allow(context.Background(), check, res); err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Allow(ctx, check, res) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("check on a stopped server: %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("check on a stopped server still waiting 30s after its 100ms deadline")
	}
}

// clusterMode is a rueidis client that says it is a cluster client.
type clusterMode struct{ rueidis.Client }

func (clusterMode) Mode() rueidis.ClientMode { return rueidis.ClientModeCluster }

// TestNew: a nil client and a cluster client are refused with an error
// naming the field, and so is a store on rueidis with Replicas.
func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client rueidis.Client
	}{{"nil", nil}, {"cluster", clusterMode{}}} {
		_, err := rueidisclient.New(tc.client)
		var ce *algorithms.ConfigError
		if !errors.As(err, &ce) || ce.Field != "client" {
			t.Errorf("New(%s): %v, want a ConfigError on client", tc.name, err)
		}
	}
	// WAIT after each script needs a go-redis client: the store says so
	// when it is made, not at the first check.
	srv := redistest.Require(t)
	_, err := redisstore.New(newClient(t, srv), redisstore.Config{Replicas: 1})
	var ce *algorithms.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Replicas" {
		t.Errorf("redisstore.New with Replicas on rueidis: %v, want a ConfigError on Replicas", err)
	}
}

// counting is a Client whose batches are counted.
type counting struct {
	*rueidisclient.Client
	batches, batched atomic.Int64 // batches sent, commands in them
}

func (c *counting) Batch() batching.Batch { return &countingBatch{Batch: c.Client.Batch(), c: c} }

type countingBatch struct {
	batching.Batch
	c *counting
	n int64
}

func (b *countingBatch) Process(ctx context.Context, cmd redis.Cmder) error {
	b.n++
	return b.Batch.Process(ctx, cmd)
}

func (b *countingBatch) Exec(ctx context.Context) ([]redis.Cmder, error) {
	b.c.batches.Add(1)
	b.c.batched.Add(b.n)
	return b.Batch.Exec(ctx)
}

// TestBatches: with one round trip in flight at most, 64 concurrent
// callers queue, and the store sends their checks as batches on the
// adapter (one EVALSHA deciding several checks): still exactly 100 of 320
// allowed under a limit of 100, for the algorithms of the batch scripts.
func TestBatches(t *testing.T) {
	srv := redistest.Require(t)
	prefix := redistest.Prefix(t)
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.TokenBucket, algorithms.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			c := &counting{Client: newClient(t, srv)}
			var cfg redisstore.Config
			cfg.Pipelines = 1
			if alg == algorithms.FixedWindow {
				mid := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
				cfg.Now = func() time.Time { return mid }
			}
			b, err := redisstore.New(c, cfg)
			if err != nil {
				t.Fatal(err)
			}
			check := algorithms.Check{Key: prefix + alg.String() + ":{hot}", Algorithm: alg, Limit: algorithms.PerHour(100)}
			var allowed atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range 64 {
				wg.Go(func() {
					<-start
					res := make([]algorithms.Result, 1)
					for range 5 {
						if err := b.Allow(context.Background(), []algorithms.Check{check}, res); err != nil {
							t.Error(err)
							return
						}
						if res[0].Allowed {
							allowed.Add(1)
						}
					}
				})
			}
			close(start)
			wg.Wait()
			if allowed.Load() != 100 {
				t.Fatalf("allowed %d of 320, want exactly 100", allowed.Load())
			}
			if c.batches.Load() == 0 {
				t.Fatal("no batch sent: 64 callers on one round trip never queued")
			}
			t.Logf("%d batches, %d commands", c.batches.Load(), c.batched.Load())
		})
	}
}

// TestConnectionKills: 32 callers check one key while its connections
// are killed every few milliseconds (CLIENT KILL, as a proxy or a failover
// drops them). A call that fails may or may not have been counted, but
// none is counted twice: rueidis does not send a decide script again after
// a lost reply. So the count in Redis lies between the checks allowed and
// those plus the ones that failed, on either rueidis mode.
func TestConnectionKills(t *testing.T) {
	srv := redistest.Require(t)
	admin := srv.Client(t)
	prefix := redistest.Prefix(t)
	const limit = 100_000
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprintf("autopipelining=%v", auto), func(t *testing.T) {
			c, err := rueidisclient.New(dialWith(t, srv, rueidis.ClientOption{DisableAutoPipelining: !auto}))
			if err != nil {
				t.Fatal(err)
			}
			mid := time.Now().Truncate(time.Hour).Add(30 * time.Minute)
			b, err := redisstore.New(c, redisstore.Config{Now: func() time.Time { return mid }})
			if err != nil {
				t.Fatal(err)
			}
			check := algorithms.Check{Key: prefix + fmt.Sprint(auto) + ":{hot}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerHour(limit)}
			var allowed, failed, kills atomic.Int64
			stop := make(chan struct{})
			killed := make(chan struct{})
			go func() {
				defer close(killed)
				for {
					select {
					case <-stop:
						return
					case <-time.After(3 * time.Millisecond):
					}
					if n, err := admin.ClientKillByFilter(context.Background(), "TYPE", "normal", "SKIPME", "yes").Result(); err == nil {
						kills.Add(n)
					}
				}
			}()
			var wg sync.WaitGroup
			for range 32 {
				wg.Go(func() {
					res := make([]algorithms.Result, 1)
					for range 200 {
						err := b.Allow(context.Background(), []algorithms.Check{check}, res)
						switch {
						case err != nil:
							failed.Add(1)
						case res[0].Allowed:
							allowed.Add(1)
						default:
							t.Errorf("denied under a limit of %d", limit)
						}
					}
				})
			}
			wg.Wait()
			close(stop)
			<-killed
			// the count: a check of cost 0 consumes nothing
			peek := check
			peek.Cost = 0
			res := make([]algorithms.Result, 1)
			var err2 error
			for range 50 { // the connection may have just been killed
				if err2 = b.Allow(context.Background(), []algorithms.Check{peek}, res); err2 == nil {
					break
				}
			}
			if err2 != nil {
				t.Fatal(err2)
			}
			counted := limit - res[0].Remaining
			t.Logf("allowed %d, failed %d, counted %d, connections killed %d", allowed.Load(), failed.Load(), counted, kills.Load())
			if counted < allowed.Load() || counted > allowed.Load()+failed.Load() {
				t.Fatalf("counted %d: not between allowed %d and allowed + failed %d", counted, allowed.Load(), allowed.Load()+failed.Load())
			}
			if allowed.Load() == 0 {
				t.Fatal("no check allowed")
			}
		})
	}
}

// TestScripter: the redis.Scripter methods answer as go-redis's do on the
// same server: ScriptLoad's digest, ScriptExists, the four EVAL forms with
// keys and arguments, a nil reply as redis.Nil, and a server error as a
// redis.Error.
func TestScripter(t *testing.T) {
	srv := redistest.Require(t)
	c := newClient(t, srv)
	gr := srv.Client(t)
	ctx := context.Background()
	src := "return {KEYS[1], ARGV[1], tonumber(ARGV[2]) + 1}"
	sha, err := c.ScriptLoad(ctx, src).Result()
	if err != nil || sha != redis.NewScript(src).Hash() {
		t.Fatalf("ScriptLoad = %q, %v; want %q", sha, err, redis.NewScript(src).Hash())
	}
	exists, err := c.ScriptExists(ctx, sha, "0000000000000000000000000000000000000000").Result()
	if err != nil || !slices.Equal(exists, []bool{true, false}) {
		t.Fatalf("ScriptExists = %v, %v; want [true false]", exists, err)
	}
	keys, args := []string{"{k}"}, []any{"a", int64(41)}
	want, err := gr.EvalSha(ctx, sha, keys, args...).Result()
	if err != nil {
		t.Fatal(err)
	}
	for name, cmd := range map[string]*redis.Cmd{
		"EvalSha":   c.EvalSha(ctx, sha, keys, args...),
		"Eval":      c.Eval(ctx, src, keys, args...),
		"EvalShaRO": c.EvalShaRO(ctx, sha, keys, args...),
		"EvalRO":    c.EvalRO(ctx, src, keys, args...),
	} {
		got, err := cmd.Result()
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, %v; want %v as go-redis reads it", name, got, err, want)
		}
	}
	if err := c.Eval(ctx, "return nil", nil).Err(); err != redis.Nil {
		t.Errorf("a nil reply: %v, want redis.Nil", err)
	}
	var re redis.Error
	if err := c.Eval(ctx, "return redis.error_reply('BOOM no')", nil).Err(); !errors.As(err, &re) || !strings.Contains(err.Error(), "BOOM no") {
		t.Errorf("an error reply: %v (%T), want a redis.Error", err, err)
	}
}

// TestRunScript: the store's own call (batching.ScriptRunner) sends
// EVALSHA or EVAL with keys and string and integer arguments, reads an
// array of integers, and answers a missing script with a NOSCRIPT
// redis.Error (which the store follows with EVAL), a nil reply with
// redis.Nil, an error reply with a redis.Error, and a reply that is not
// integers with an error.
func TestRunScript(t *testing.T) {
	srv := redistest.Require(t)
	c := newClient(t, srv)
	ctx := context.Background()
	src := "return {#KEYS, tonumber(ARGV[1]) + 1, tonumber(ARGV[2]) * 2, #ARGV[3]}"
	s := redis.NewScript(src)
	keys, args := []string{"{k}a", "{k}b"}, []any{"41", int64(-21), 7}
	if err := srv.Client(t).ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := c.RunScript(ctx, false, s.Hash(), keys, args)
	var re redis.Error
	if !errors.As(err, &re) || !redis.HasErrorPrefix(err, "NOSCRIPT") {
		t.Fatalf("EVALSHA of a script the server lacks: %v (%T), want a NOSCRIPT redis.Error", err, err)
	}
	for _, eval := range []bool{true, false} { // EVAL caches it for the EVALSHA after
		script := s.Hash()
		if eval {
			script = src
		}
		got, err := c.RunScript(ctx, eval, script, keys, args)
		if want := []int64{2, 42, -42, 1}; err != nil || !slices.Equal(got, want) {
			t.Errorf("eval %v: %v, %v; want %v", eval, got, err, want)
		}
	}
	if got, err := c.RunScript(ctx, true, "return {}", nil, nil); err != nil || len(got) != 0 {
		t.Errorf("an empty reply: %v, %v; want none and no error", got, err)
	}
	if _, err := c.RunScript(ctx, true, "return nil", nil, nil); err != redis.Nil {
		t.Errorf("a nil reply: %v, want redis.Nil", err)
	}
	if _, err := c.RunScript(ctx, true, "return redis.error_reply('BOOM no')", nil, nil); !errors.As(err, &re) || !strings.Contains(err.Error(), "BOOM no") {
		t.Errorf("an error reply: %v (%T), want a redis.Error", err, err)
	}
	if _, err := c.RunScript(ctx, true, "return {1, 'x'}", nil, nil); err == nil {
		t.Error("a reply with a string in it: no error")
	}
}

// countingRunner is a Client whose RunScript calls are counted.
type countingRunner struct {
	*rueidisclient.Client
	runs atomic.Int64
}

func (c *countingRunner) RunScript(ctx context.Context, eval bool, script string, keys []string, args []any) ([]int64, error) {
	c.runs.Add(1)
	return c.Client.RunScript(ctx, eval, script, keys, args)
}

// TestLoneCallsRunScript: a lone caller's check goes through RunScript,
// one call per check, whether the store pipelines (a round trip is free)
// or not (Pipelines -1), and decides as the vectors do.
func TestLoneCallsRunScript(t *testing.T) {
	srv := redistest.Require(t)
	for _, pipelines := range []int{0, -1} {
		c := &countingRunner{Client: newClient(t, srv)}
		b, err := redisstore.New(c, redisstore.Config{Pipelines: pipelines})
		if err != nil {
			t.Fatal(err)
		}
		for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.GCRA, algorithms.TokenBucket} {
			key := fmt.Sprintf("%s{%d-%v}", redistest.Prefix(t), pipelines, alg)
			res := make([]algorithms.Result, 1)
			// a first check of another key has the server cache the
			// script (NOSCRIPT, then EVAL: two calls)
			warm := []algorithms.Check{{Key: key + ":warm", Algorithm: alg, Limit: algorithms.PerHour(2)}}
			if err := b.Allow(context.Background(), warm, res); err != nil {
				t.Fatal(err)
			}
			check := []algorithms.Check{{Key: key, Algorithm: alg, Limit: algorithms.PerHour(2)}}
			c.runs.Store(0)
			for i, want := range []bool{true, true, false} {
				if err := b.Allow(context.Background(), check, res); err != nil {
					t.Fatal(err)
				}
				if res[0].Allowed != want {
					t.Errorf("Pipelines %d, %v, check %d: %s, want allowed %v", pipelines, alg, i, backendtest.FormatResult(res[0]), want)
				}
			}
			if got := c.runs.Load(); got != 3 {
				t.Errorf("Pipelines %d, %v: %d RunScript calls for 3 checks, want 3", pipelines, alg, got)
			}
		}
	}
}
