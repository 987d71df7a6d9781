package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/middleware/admin"
	"github.com/redlimit/redlimit/middleware/engine"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// t0 is the clock of every check: 20 s into a minute, so a fixed window
// of a minute resets 40 s later.
var t0 = time.Unix(1_700_000_000, 0)

func init() { clock = func() time.Time { return t0 } }

// cli runs the command line args and returns its exit code, stdout and
// stderr.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	code := run(context.Background(), args, &out, &errs)
	return code, out.String(), errs.String()
}

// want runs args and checks the exit code 0 and the exact output.
func want(t *testing.T, wantOut string, args ...string) {
	t.Helper()
	code, out, errs := cli(t, args...)
	if code != 0 || out != wantOut {
		t.Errorf("redlimit %s: exit %d, stderr %q\ngot:\n%s\nwant:\n%s", strings.Join(args, " "), code, errs, out, wantOut)
	}
}

// service is what a service built with rules on client would keep: an
// engine on the same keys and clock, and its admin endpoint.
type service struct {
	e   *engine.Engine
	url string
	adm *admin.Handler
}

var rules = []engine.Rule{
	{Name: "login", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(5)},
	{Name: "api", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(60).WithBurst(10)},
}

func newService(t *testing.T, client redis.UniversalClient, prefix string) *service {
	t.Helper()
	store, err := redisstore.New(client, redisstore.Config{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(admin.Config{Authorize: admin.Token("tok"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	src, _ := adm.Source("svc")
	e, err := engine.New(store, engine.Config{Rules: rules, Prefix: prefix, OnDecision: src.OnDecision, Logger: slog.New(slog.DiscardHandler), NoDenyCache: true,
		Timeout: time.Minute}) // a loaded machine must not fail the test
	if err != nil {
		t.Fatal(err)
	}
	src.Attach(e)
	srv := httptest.NewServer(adm)
	t.Cleanup(func() { srv.Close(); adm.Close(); e.Close() })
	return &service{e: e, url: srv.URL + "/debug/redlimit/", adm: adm}
}

// spend takes n units of rule for material.
func (s *service) spend(t *testing.T, rule, material string, n int) {
	t.Helper()
	in := make([]engine.Input, len(rules))
	for i := range in {
		in[i].Exempt = rules[i].Name != rule
	}
	in[indexOf(rule)].Material = material
	var d engine.Decision
	for range n {
		s.e.Decide(context.Background(), in, &d)
		if d.Err != nil {
			t.Fatal(d.Err)
		}
	}
}

func indexOf(rule string) int {
	for i, r := range rules {
		if r.Name == rule {
			return i
		}
	}
	panic(rule)
}

// prefix returns a key prefix of t's own, without the characters a
// prefix may not hold.
func prefix(t *testing.T) string {
	p := strings.NewReplacer("/", "-", ":", "", " ", "").Replace(redistest.Prefix(t))
	return strings.TrimSuffix(p, "-")
}

func TestPeekReset(t *testing.T) {
	srv := redistest.Require(t)
	p := prefix(t)
	s := newService(t, srv.Client(t), p)
	s.spend(t, "login", "alice", 3)
	url := "redis://" + srv.Addr
	g := []string{"-redis", url, "-prefix", p}

	want(t, ""+
		"RULE   KEY    NEXT     REMAINING  LIMIT  RETRY AFTER  FULL AFTER\n"+
		"login  alice  allowed  2          5      0s           40s\n",
		append(g, "peek", "-alg", "fixed_window", "-limit", "5/1m", "login", "alice")...)
	// The limit from the admin endpoint; JSON.
	want(t, `{"rule":"login","key":"alice","storage_key":"`+p+`:login:fw:{alice}","allowed":true,"remaining":2,"limit":5,"retry_after_seconds":0,"reset_after_seconds":40}`+"\n",
		append(g, "-admin", s.url, "-token", "tok", "-json", "peek", "login", "alice")...)
	s.spend(t, "login", "alice", 3) // 2 allowed, 1 denied
	want(t, ""+
		"RULE   KEY    NEXT    REMAINING  LIMIT  RETRY AFTER  FULL AFTER\n"+
		"login  alice  denied  0          5      40s          40s\n",
		append(g, "-admin", s.url, "-token", "tok", "peek", "svc/login", "alice")...)

	want(t, "reset "+p+":login:fw:{alice}\n", append(g, "reset", "-alg", "fixed_window", "login", "alice")...)
	want(t, ""+
		"RULE   KEY    NEXT     REMAINING  LIMIT  RETRY AFTER  FULL AFTER\n"+
		"login  alice  allowed  5          5      0s           0s\n",
		append(g, "peek", "-alg", "fixed_window", "-limit", "5/m", "login", "alice")...)
	// GCRA with a burst, reset through the admin's rule list, in JSON.
	s.spend(t, "api", "k1", 4)
	want(t, `{"rule":"api","key":"k1","storage_key":"`+p+`:api:gcra:{k1}","allowed":true,"remaining":6,"limit":10,"retry_after_seconds":0,"reset_after_seconds":4}`+"\n",
		append(g, "-json", "peek", "-alg", "gcra", "-limit", "60/1m", "-burst", "10", "api", "k1")...)
	want(t, `{"key":"k1","reset":true,"rule":"api","storage_key":"`+p+`:api:gcra:{k1}"}`+"\n",
		append(g, "-admin", s.url, "-token", "tok", "-json", "reset", "api", "k1")...)
}

func TestUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{nil, 2, "usage: redlimit"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"peek", "login"}, 2, "want RULE KEY, got 1 arguments"},
		{[]string{"peek", "login", "alice"}, 2, `rule "login": its algorithm is unknown: give -alg, or -admin URL`},
		{[]string{"peek", "-alg", "gcra", "login", "alice"}, 2, `its limit is unknown`},
		{[]string{"peek", "-alg", "leaky", "-limit", "1/s", "login", "alice"}, 2, `unknown algorithm "leaky"`},
		{[]string{"peek", "-alg", "gcra", "-limit", "ten/s", "login", "alice"}, 2, `-limit "ten/s": want RATE/PERIOD`},
		{[]string{"peek", "-alg", "sliding_log", "-limit", "5000/1s", "login", "alice"}, 2, "Limit.Rate"},
		{[]string{"top"}, 2, "top needs the rules' limits"},
		{[]string{"watch"}, 2, "watch polls admin endpoints"},
		{[]string{"-admin", "http://127.0.0.1:1/", "peek", "login", "alice"}, 1, "connection refused"},
	}
	for _, tt := range tests {
		code, out, errs := cli(t, tt.args...)
		if code != tt.code || !strings.Contains(errs, tt.err) || out != "" {
			t.Errorf("redlimit %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(tt.args, " "), code, out, errs, tt.code, tt.err)
		}
	}
}

func TestTop(t *testing.T) {
	srv := redistest.Require(t)
	p := prefix(t)
	s := newService(t, srv.Client(t), p)
	s.spend(t, "login", "alice", 4)
	s.spend(t, "login", "bob", 1)
	s.spend(t, "login", "carol", 6) // denied once
	s.spend(t, "api", "k1", 9)
	s.spend(t, "api", "k2", 2)
	// a key of a rule the admin does not know, and a stray key
	srv.Client(t).Set(context.Background(), p+":old:fw:{x}", "1", time.Minute)
	srv.Client(t).Set(context.Background(), p+":notakey", "1", time.Minute)
	g := []string{"-redis", "redis://" + srv.Addr, "-prefix", p}
	want(t, ""+
		"RULE   KEY    NEXT     REMAINING  LIMIT  RETRY AFTER  FULL AFTER\n"+
		"login  carol  denied   0          5      40s          40s\n"+
		"api    k1     allowed  1          10     0s           9s\n"+
		"login  alice  allowed  1          5      0s           40s\n"+
		"api    k2     allowed  8          10     0s           2s\n"+
		"scanned 6 keys on 1 masters; 1 of rules whose limit is unknown skipped\n",
		append(g, "-admin", s.url, "-token", "tok", "top", "-n", "4")...)
	want(t, ""+
		"RULE   KEY    NEXT    REMAINING  LIMIT  RETRY AFTER  FULL AFTER\n"+
		"login  carol  denied  0          5      40s          40s\n"+
		"scanned 3 keys on 1 masters; 0 of rules whose limit is unknown skipped\n",
		append(g, "top", "-rule", "login", "-alg", "fixed_window", "-limit", "5/1m", "-n", "1")...)
}

// TestCluster: every command on a real Redis Cluster; top scans every
// master.
func TestCluster(t *testing.T) {
	redistest.RequireCluster(t)
	cl, err := redistest.StartCluster(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p := "c"
	s := newService(t, cl.Client(t), p)
	users := []string{"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7"}
	for i, u := range users {
		s.spend(t, "login", u, i%5+1)
	}
	// the keys are spread over the three masters
	ctx := context.Background()
	var per []int64
	cl.ForEachMaster(ctx, func(c *redis.Client) error {
		n, err := c.DBSize(ctx).Result()
		per = append(per, n)
		return err
	})
	for _, n := range per {
		if n == 0 {
			t.Fatalf("keys per master %v: want every master to hold some", per)
		}
	}
	url := "redis://" + cl.Addrs()[0] + "?addr=" + cl.Addrs()[1] + "&addr=" + cl.Addrs()[2]
	g := []string{"-redis", url, "-cluster", "-prefix", p, "-admin", s.url, "-token", "tok"}
	want(t, ""+
		"RULE   KEY  NEXT     REMAINING  LIMIT  RETRY AFTER  FULL AFTER\n"+
		"login  u4   denied   0          5      40s          40s\n"+
		"login  u3   allowed  1          5      0s           40s\n"+
		"login  u2   allowed  2          5      0s           40s\n"+
		"scanned 8 keys on 3 masters; 0 of rules whose limit is unknown skipped\n",
		append(g, "top", "-n", "3")...)
	want(t, ""+
		"RULE   KEY  NEXT     REMAINING  LIMIT  RETRY AFTER  FULL AFTER\n"+
		"login  u3   allowed  1          5      0s           40s\n",
		append(g, "peek", "login", "u3")...)
	want(t, "reset c:login:fw:{u3}\n", append(g, "reset", "login", "u3")...)
	want(t, ""+
		"RULE   KEY  NEXT     REMAINING  LIMIT  RETRY AFTER  FULL AFTER\n"+
		"login  u3   allowed  5          5      0s           0s\n",
		append(g, "peek", "login", "u3")...)
	// watch the service deciding on the cluster: 4 decisions in 2 s.
	defer func(w func() time.Time, s func(context.Context, time.Duration) error) { wallClock, sleep = w, s }(wallClock, sleep)
	now := t0
	wallClock = func() time.Time { return now }
	sleep = func(context.Context, time.Duration) error {
		s.spend(t, "login", "u3", 4)
		now = now.Add(2 * time.Second)
		return nil
	}
	want(t, `{"time":"2023-11-14T22:13:22Z","seconds":2,"rules":[{"rule":"svc/api","allowed":0,"denied":0,"denied_local":0,"shadow_denied":0,"errors":0,"fallback":0,"decisions_per_second":0,"denied_per_second":0},{"rule":"svc/login","allowed":4,"denied":0,"denied_local":0,"shadow_denied":0,"errors":0,"fallback":0,"decisions_per_second":2,"denied_per_second":0}]}`+"\n",
		"-admin", s.url, "-token", "tok", "-json", "watch", "-count", "1")
}

// TestWatch polls two instances' admin endpoints; between polls each
// serves known traffic and the clock moves by one second.
func TestWatch(t *testing.T) {
	srv := redistest.Require(t)
	p := prefix(t)
	a := newService(t, srv.Client(t), p)
	b := newService(t, srv.Client(t), p)
	now := t0
	var mu sync.Mutex
	defer func(w func() time.Time, s func(context.Context, time.Duration) error) { wallClock, sleep = w, s }(wallClock, sleep)
	wallClock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	round := 0
	sleep = func(ctx context.Context, d time.Duration) error {
		round++
		a.spend(t, "login", "w"+string(rune('0'+round)), 2*round)
		b.spend(t, "api", "w", 4)
		mu.Lock()
		now = now.Add(2 * time.Second)
		mu.Unlock()
		return nil
	}
	want(t, ""+
		`{"time":"2023-11-14T22:13:22Z","seconds":2,"rules":[{"rule":"svc/api","allowed":4,"denied":0,"denied_local":0,"shadow_denied":0,"errors":0,"fallback":0,"decisions_per_second":2,"denied_per_second":0},{"rule":"svc/login","allowed":2,"denied":0,"denied_local":0,"shadow_denied":0,"errors":0,"fallback":0,"decisions_per_second":1,"denied_per_second":0}]}`+"\n"+
		`{"time":"2023-11-14T22:13:24Z","seconds":2,"rules":[{"rule":"svc/api","allowed":4,"denied":0,"denied_local":0,"shadow_denied":0,"errors":0,"fallback":0,"decisions_per_second":2,"denied_per_second":0},{"rule":"svc/login","allowed":4,"denied":0,"denied_local":0,"shadow_denied":0,"errors":0,"fallback":0,"decisions_per_second":2,"denied_per_second":0}]}`+"\n",
		"-admin", a.url+","+b.url, "-token", "tok", "-json", "watch", "-interval", "1s", "-count", "2")
	round = 0 // the third round of the api key: 2 allowed, 2 denied (burst 10)
	want(t, ""+
		"22:13:26   DECISIONS/S  DENIED/S  ALLOWED  DENIED  LOCAL  SHADOW  ERRORS  FALLBACK\n"+
		"svc/api    2.0          1.0       2        2       0      0       0       0\n"+
		"svc/login  1.0          0.0       2        0       0      0       0       0\n",
		"-admin", a.url+","+b.url, "-token", "tok", "watch", "-interval", "1s", "-count", "1")
}
