package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/middleware/admin"
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
	e   *redlimit.Limiter
	url string
	adm *admin.Handler
}

var rules = []redlimit.Rule{
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
	e, err := redlimit.New(store, redlimit.Config{Rules: rules, Prefix: prefix, OnDecision: src.OnDecision, Logger: slog.New(slog.DiscardHandler), NoDenyCache: true,
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
	var in []redlimit.Input
	for _, r := range rules {
		in = append(in, redlimit.Input{Rule: r.Name, Material: material, Exempt: r.Name != rule})
	}
	var d redlimit.Decision
	for range n {
		s.e.Decide(context.Background(), in, &d)
		if d.Err != nil {
			t.Fatal(d.Err)
		}
	}
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

	// a fixed window rule given by flags: the command must be told
	// whether it has quota blocks (its key has no epoch counter to say)
	code, out, errs := cli(t, append(g, "reset", "-alg", "fixed_window", "login", "alice")...)
	if code != 2 || out != "" || !strings.Contains(errs, "say whether it has quota blocks (-blocks, or -blocks=false)") {
		t.Errorf("reset of a fixed window key without -blocks: exit %d, stdout %q, stderr %q; want exit 2 asking for -blocks", code, out, errs)
	}
	want(t, "reset "+p+":login:fw:{alice}\n", append(g, "reset", "-alg", "fixed_window", "-blocks=false", "login", "alice")...)
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
		// every other mistake on the command line: 2, as the help says
		{[]string{"-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"peek", "-bogus", "login", "alice"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"top", "-n", "abc"}, 2, `invalid value "abc" for flag -n`},
		{[]string{"-admin", "http://127.0.0.1:1/", "watch", "-interval", "xyz"}, 2, `invalid value "xyz" for flag -interval`},
		{[]string{"-redis", "nope://x", "peek", "-alg", "gcra", "-limit", "1/s", "login", "alice"}, 2, `-redis "nope://x": redis: invalid URL scheme`},
		{[]string{"-prefix", "a{b", "peek", "-alg", "gcra", "-limit", "1/s", "login", "alice"}, 2, `-prefix "a{b": must be non-empty, without braces or spaces`},
		{[]string{"peek", "-alg", "gcra", "-limit", "1/s", "bad!name", "alice"}, 2, `rule "bad!name": Name must be 1-64 characters`},
		{[]string{"-admin", "http://[::1", "peek", "login", "alice"}, 2, `-admin "http://[::1": parse`},
		{[]string{"-admin", "ftp://x/", "peek", "login", "alice"}, 2, "want an http or https URL"},
		{[]string{"-admin", "ftp://x/", "watch"}, 2, "want an http or https URL"},
		{[]string{"peek", "-alg", "fixed_window", "-limit", "5/day@Mars/Base", "login", "alice"}, 2, `the time zone "Mars/Base"`},
		{[]string{"peek", "-alg", "fixed_window", "-limit", "5/1m", "login", ""}, 2, "the key is empty"},
		{[]string{"reset", "-alg", "fixed_window", "-blocks", "login", "alice"}, 2, "has quota blocks: its keys are reset through epochs of its windows; give -limit"},
		{[]string{"reset", "-alg", "fixed_window", "-blocks", "-limit", "1099511627776/1m", "login", "alice"}, 2, "Blocks needs a capacity below 2^39"},
		{[]string{"top", "-rule", "login", "-alg", "gcra", "-limit", "1/s", "extra"}, 2, "top takes no arguments"},
		{[]string{"-admin", "http://127.0.0.1:1/", "watch", "-count", "-1"}, 2, "-count >= 0"},
		// help: 0
		{[]string{"-h"}, 0, "usage: redlimit"},
		{[]string{"peek", "-h"}, 0, "usage: redlimit peek"},
		{[]string{"top", "-h"}, 0, "usage: redlimit top"},
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
	// a key of a rule the admin does not know, a stray key, a sibling
	// (an epoch counter), a key of another type and one that holds no
	// number, under names of the login rule: each skipped and counted,
	// the table printed all the same
	ctx := context.Background()
	c := srv.Client(t)
	c.Set(ctx, p+":old:fw:{x}", "1", time.Minute)
	c.Set(ctx, p+":notakey", "1", time.Minute)
	c.Set(ctx, p+":login:fw:{x}:epoch", "1", time.Minute)
	c.RPush(ctx, p+":login:fw:{mallory}", "a", "b")
	c.Set(ctx, p+":login:fw:{eve}", "abc", time.Minute)
	g := []string{"-redis", "redis://" + srv.Addr, "-prefix", p}
	want(t, ""+
		"RULE   KEY    NEXT     REMAINING  LIMIT  RETRY AFTER  FULL AFTER\n"+
		"login  carol  denied   0          5      40s          40s\n"+
		"api    k1     allowed  1          10     0s           9s\n"+
		"login  alice  allowed  1          5      0s           40s\n"+
		"api    k2     allowed  8          10     0s           2s\n"+
		"scanned 10 keys on 1 masters; skipped 5: 1 of rules whose limit is unknown, 1 markers and epoch counters, 1 not rate-limit keys, 1 of another Redis type, 1 not readable as a rate-limit state (not a number)\n",
		append(g, "-admin", s.url, "-token", "tok", "top", "-n", "4")...)
	want(t, ""+
		"RULE   KEY    NEXT    REMAINING  LIMIT  RETRY AFTER  FULL AFTER\n"+
		"login  carol  denied  0          5      40s          40s\n"+
		"scanned 6 keys on 1 masters; skipped 3: 1 markers and epoch counters, 1 of another Redis type, 1 not readable as a rate-limit state (not a number)\n",
		append(g, "top", "-rule", "login", "-alg", "fixed_window", "-limit", "5/1m", "-n", "1")...)
	want(t, `{"keys":[{"rule":"login","key":"carol","storage_key":"`+p+`:login:fw:{carol}","allowed":false,"remaining":0,"limit":5,"retry_after_seconds":40,"reset_after_seconds":40}],"scanned":6,"masters":1,"skipped":3,"skipped_why":{"markers and epoch counters":1,"not readable as a rate-limit state (not a number)":1,"of another Redis type":1}}`+"\n",
		append(g, "-json", "top", "-rule", "login", "-alg", "fixed_window", "-limit", "5/1m", "-n", "1")...)
}

// TestEscapes: key material with control bytes (an escape sequence that
// would recolour or rewrite the terminal) is printed quoted, never raw,
// by peek, reset and top; JSON escapes it as JSON does.
func TestEscapes(t *testing.T) {
	srv := redistest.Require(t)
	p := prefix(t)
	const evil = "\x1b[31mred\x1b]0;pwned\x07"
	store, err := redisstore.New(srv.Client(t), redisstore.Config{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	// a key written raw (not by an engine, which encodes such bytes)
	check := []algorithms.Check{{Key: p + ":login:fw:{" + evil + "}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(5), Cost: 2}}
	if err := store.Allow(context.Background(), check, make([]algorithms.Result, 1)); err != nil {
		t.Fatal(err)
	}
	g := []string{"-redis", "redis://" + srv.Addr, "-prefix", p}
	q := strconv.Quote(evil)
	for _, args := range [][]string{
		{"top", "-rule", "login", "-alg", "fixed_window", "-limit", "5/1m"},
		{"peek", "-alg", "fixed_window", "-limit", "5/1m", "login", evil},
		{"reset", "-alg", "fixed_window", "-blocks=false", "login", evil},
	} {
		code, out, errs := cli(t, append(g, args...)...)
		if code != 0 || strings.ContainsAny(out+errs, "\x1b\x07") || !strings.Contains(out, q) && !strings.Contains(out, "%1B") {
			t.Errorf("redlimit %s: exit %d, stdout %q, stderr %q; want the key printed quoted (%s), no control byte", args[0], code, out, errs, q)
		}
		if args[0] == "top" && !strings.Contains(out, "login  "+q+"  allowed  3") {
			t.Errorf("top printed %q, want the row of %s with 3 remaining", out, q)
		}
	}
	if got, want := show("GET /search"), "GET /search"; got != want {
		t.Errorf("show(%q) = %q, want it as it is", "GET /search", got)
	}
	if got, want := show(`"quoted"`), `"\"quoted\""`; got != want {
		t.Errorf("show(%q) = %q, want %q: a key that looks quoted is quoted", `"quoted"`, got, want)
	}
	if got, want := show("\u202eevil"), `"\u202eevil"`; got != want {
		t.Errorf("show(%q) = %q, want %q: a bidirectional override is escaped", "\u202eevil", got, want)
	}
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
	top := "" +
		"RULE   KEY  NEXT     REMAINING  LIMIT  RETRY AFTER  FULL AFTER\n" +
		"login  u4   denied   0          5      40s          40s\n" +
		"login  u3   allowed  1          5      0s           40s\n" +
		"login  u2   allowed  2          5      0s           40s\n" +
		"scanned 8 keys on 3 masters; skipped 0\n"
	want(t, top, append(g, "top", "-n", "3")...)
	// without -cluster, from one node's address: the cluster is detected
	// (before, top scanned that node alone and said nothing)
	for _, addr := range cl.Addrs()[:3] {
		want(t, top, "-redis", "redis://"+addr, "-prefix", p, "-admin", s.url, "-token", "tok", "top", "-n", "3")
	}
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
