package faults_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

var (
	manyKeys   = flag.Int("faults.keys", 2_000, "distinct clients per algorithm in TestManyKeysExpire (docs/reliability.md quotes -faults.keys=1000000 -faults.period=3m -faults.alg=gcra)")
	manyPeriod = flag.Duration("faults.period", 3*time.Second, "the limit's period in TestManyKeysExpire")
	manyAlg    = flag.String("faults.alg", "", "run TestManyKeysExpire for this algorithm only")
)

func TestMain(m *testing.M) {
	if os.Getenv("REDLIMIT_CHILD") != "" {
		os.Exit(child())
	}
	os.Exit(redistest.Main(m))
}

// child is one OS process of TestExactAcrossProcesses: 32 goroutines on its
// own connection pool, 10 checks each, printing how many were allowed.
func child() int {
	alg, err := algorithms.ParseAlgorithm(os.Getenv("REDLIMIT_ALG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDLIMIT_ADDR"), PoolSize: 32})
	defer client.Close()
	b, _ := redisstore.New(client, redisstore.Config{})
	check := []algorithms.Check{{Key: os.Getenv("REDLIMIT_KEY"), Algorithm: alg, Limit: algorithms.PerHour(100)}}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			res := make([]algorithms.Result, 1)
			for range 10 {
				if err := b.Allow(context.Background(), check, res); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(3)
				}
				if res[0].Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Println(allowed.Load())
	return 0
}

// TestExactAcrossProcesses: three OS processes (this test binary, re-run as
// children), each with its own connection pool, share one limit of 100 per
// hour and together make 960 checks: exactly 100 are allowed, for every
// exact algorithm (and the sliding window counter, exact within one window).
func TestExactAcrossProcesses(t *testing.T) {
	srv := redistest.Require(t)
	prefix := redistest.Prefix(t)
	for _, alg := range algorithms.Algorithms {
		if alg == algorithms.FixedWindow || alg == algorithms.SlidingWindow {
			// Window algorithms on the server clock: skip the last minute
			// of an hour so no window boundary falls inside the test.
			if time.Now().Minute() == 59 {
				t.Logf("%v: skipped in the last minute of the hour", alg)
				continue
			}
		}
		t.Run(alg.String(), func(t *testing.T) {
			key := prefix + alg.String() + ":{shared}"
			var cmds []*exec.Cmd
			var outs []*strings.Builder
			for range 3 {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "REDLIMIT_CHILD=1", "REDLIMIT_ADDR="+srv.Addr, "REDLIMIT_KEY="+key, "REDLIMIT_ALG="+alg.String())
				var out strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds, outs = append(cmds, cmd), append(outs, &out)
			}
			total := 0
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("child %d: %v\n%s", i, err, outs[i])
				}
				n, err := strconv.Atoi(strings.TrimSpace(outs[i].String()))
				if err != nil {
					t.Fatalf("child %d printed %q", i, outs[i])
				}
				total += n
			}
			if total != 100 {
				t.Fatalf("%v: 3 processes allowed %d of 960 in total, want exactly 100", alg, total)
			}
		})
	}
}

// TestManyKeysExpire sends one request per distinct client through the
// middleware (per-IP rule, limit 10 per -faults.period) for every
// algorithm, one after the other on an empty server, then checks Redis
// memory per key, that every key carries a TTL of at most the period (two
// for the sliding window counter), and
// that no key is left once the longest TTL has run out. The period need not
// exceed the time sending takes: keys that expire meanwhile are counted
// among the created ones.
func TestManyKeysExpire(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	srv, err := redistest.Start() // own server: DBSIZE and memory are ours
	if err != nil {
		redistest.Require(t)
		t.Fatal(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	defer client.Close()
	ctx := context.Background()
	backend, _ := redisstore.New(client, redisstore.Config{})
	ip, _ := keyfunc.IP(keyfunc.IPConfig{})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	n := *manyKeys
	for _, alg := range algorithms.Algorithms {
		if alg == algorithms.Concurrency {
			// the middleware releases each request's slot: the key is
			// deleted when the request ends, and none is left to count
			// (TestConcurrencyDifferential bounds its members)
			continue
		}
		if *manyAlg != "" && alg.String() != *manyAlg {
			continue
		}
		expiredBefore := expiredKeys(t, client)
		var errs atomic.Int64
		var firstErr atomic.Value
		lim, err := redlimit.New(backend, redlimit.Config{Prefix: "many", Timeout: 5 * time.Second, Rules: []redlimit.Rule{
			{Name: alg.String(), Algorithm: alg, Limit: algorithms.Limit{Rate: 10, Period: *manyPeriod}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		mw, err := middleware.New(lim, middleware.Config{OnDecision: func(_ *http.Request, d *redlimit.Decision) {
			if d.Err != nil || d.Source != redlimit.SourcePrimary {
				errs.Add(1)
				firstErr.CompareAndSwap(nil, fmt.Sprintf("%v (source %v)", d.Err, d.Source))
			}
		}, Rules: []middleware.Rule{{Name: alg.String(), Key: ip}}})
		if err != nil {
			t.Fatal(err)
		}
		h := mw.Handler(ok)
		// Window algorithms keep a key until its window ends: start right
		// after a window boundary so no key expires while clients are sent.
		time.Sleep(time.Until(time.Now().Truncate(*manyPeriod).Add(*manyPeriod + 10*time.Millisecond)))
		start := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				req := httptest.NewRequest("GET", "/", nil)
				rec := httptest.NewRecorder()
				for {
					i := next.Add(1) - 1
					if i >= int64(n) {
						return
					}
					req.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1", i>>16&255, i>>8&255, i&255)
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						t.Errorf("client %d: status %d", i, rec.Code)
						return
					}
				}
			})
		}
		wg.Wait()
		sent := time.Since(start)
		if errs.Load() > 0 {
			t.Fatalf("%v: %d requests not decided by Redis, first: %v", alg, errs.Load(), firstErr.Load())
		}
		keys, _ := client.DBSize(ctx).Result()
		if created := keys + expiredKeys(t, client) - expiredBefore; created != int64(n) {
			t.Fatalf("%v: %d keys created (live + expired) for %d clients", alg, created, n)
		}
		perKey := sampleMemoryUsage(t, client)
		// Every key carries a TTL of at most the period (two for the
		// sliding window counter, which needs the previous window's count
		// during the next one): check each one,
		// then wait for the longest to run out and make Redis look at
		// every key. Nothing here depends on how fast the machine is: a
		// slow run only waits longer.
		bound := *manyPeriod
		if alg == algorithms.SlidingWindow {
			bound *= 2
		}
		longest, checked := checkTTLs(t, client, bound)
		time.Sleep(time.Until(checked.Add(longest + time.Millisecond)))
		if left := expireAll(t, client); left != 0 {
			t.Fatalf("%v: %d keys still there after their TTLs (at most %v) ran out", alg, left, longest)
		}
		gone := time.Since(start) - sent
		t.Logf("%-14s %7d clients in %v (%.0f req/s), MEMORY USAGE %3d B/key, longest TTL %v, all keys gone %v after the last request",
			alg, n, sent.Round(time.Millisecond), float64(n)/sent.Seconds(), perKey, longest.Round(time.Millisecond), gone.Round(10*time.Millisecond))
		mw.Close()
	}
}

// expiredKeys returns INFO stats expired_keys: keys Redis removed because
// their TTL ran out.
func expiredKeys(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "expired_keys:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	t.Fatal("no expired_keys in INFO stats")
	return 0
}

// checkTTLs fails unless every live key has a TTL of at most bound, and
// returns the longest TTL seen and when the check ended: by then plus that
// TTL, every key has expired.
func checkTTLs(t *testing.T, c *redis.Client, bound time.Duration) (time.Duration, time.Time) {
	t.Helper()
	ctx := context.Background()
	var longest time.Duration
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	var batch []string
	flush := func() {
		cmds := make([]*redis.DurationCmd, len(batch))
		pipe := c.Pipeline()
		for i, k := range batch {
			cmds[i] = pipe.PTTL(ctx, k)
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			t.Fatal(err)
		}
		for i, cmd := range cmds {
			switch ttl := cmd.Val(); {
			case ttl == -2: // expired since the scan
			case ttl < 0:
				t.Fatalf("key %q has no TTL", batch[i])
			case ttl > bound:
				t.Fatalf("key %q has a TTL of %v, longer than %v", batch[i], ttl, bound)
			default:
				longest = max(longest, ttl)
			}
		}
		batch = batch[:0]
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == 1000 {
			flush()
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	flush()
	return longest, time.Now()
}

// expireAll scans every key, which makes Redis expire those whose TTL has
// run out (as any access does), and returns how many keys are left.
func expireAll(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	ctx := context.Background()
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		c.Exists(ctx, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	n, err := c.DBSize(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// sampleMemoryUsage returns the mean MEMORY USAGE of up to 200 live keys.
func sampleMemoryUsage(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	ctx := context.Background()
	keys, _, err := c.Scan(ctx, 0, "*", 1000).Result()
	if err != nil {
		t.Fatal(err)
	}
	var sum, n int64
	for _, k := range keys[:min(len(keys), 200)] {
		if u, err := c.MemoryUsage(ctx, k).Result(); err == nil {
			sum += u
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / n
}

// TestServerChangesAreTransparent: SCRIPT FLUSH, FUNCTION FLUSH and CONFIG
// SET between requests change nothing for the caller.
func TestServerChangesAreTransparent(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	ctx := context.Background()
	b, _ := redisstore.New(c, redisstore.Config{})
	check := []algorithms.Check{{Key: redistest.Prefix(t) + "{k}", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(10)}}
	res := make([]algorithms.Result, 1)
	changes := []func() error{
		func() error { return c.ScriptFlush(ctx).Err() },
		func() error { return c.FunctionFlush(ctx).Err() },
		func() error { return c.ConfigSet(ctx, "lua-time-limit", "4000").Err() },
		func() error { return c.ConfigSet(ctx, "maxmemory-policy", "volatile-ttl").Err() },
		func() error { return c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err() },
	}
	for i, change := range changes {
		if err := change(); err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
		if err := b.Allow(ctx, check, res); err != nil {
			t.Fatalf("after change %d: %v", i, err)
		}
		if !res[0].Allowed || res[0].Remaining != int64(9-i) {
			t.Fatalf("after change %d: %+v, want allowed with %d remaining", i, res[0], 9-i)
		}
	}
}
