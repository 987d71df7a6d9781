package middleware_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"crypto/subtle"
	"net/netip"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/headers"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware"
)

// clock is the fixed time of the examples, so that their output is
// reproducible. A real service leaves both Now fields nil (the store's
// and the Limiter's).
func clock() time.Time { return time.Unix(1_700_000_000, 0) }

// Limit POST /api/orders to 3 requests a minute per client IP and route,
// on an http.ServeMux. The fourth request is denied with Retry-After.
func ExampleNew() {
	backend, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	ip, err := keyfunc.IP(keyfunc.IPConfig{}) // no proxy in front: the TCP peer is the client
	if err != nil {
		log.Fatal(err)
	}
	key, err := keyfunc.Join(keyfunc.Route(), ip)
	if err != nil {
		log.Fatal(err)
	}
	lim, err := redlimit.New(backend, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "orders", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(3)}},
		Now:   clock,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		Rules: []middleware.Rule{{Name: "orders", Key: key}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()

	orders := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "created\n")
	})
	mux := http.NewServeMux()
	mux.Handle("POST /api/orders", mw.Handler(orders))

	for range 4 {
		r := httptest.NewRequest("POST", "/api/orders", nil)
		r.RemoteAddr = "203.0.113.7:50000"
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		h := w.Header()
		fmt.Printf("%d limit=%s remaining=%s reset=%s retry-after=%q\n", w.Code,
			h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"), h.Get("Retry-After"))
	}
	// Output:
	// 200 limit=3 remaining=2 reset=1700000020 retry-after=""
	// 200 limit=3 remaining=1 reset=1700000040 retry-after=""
	// 200 limit=3 remaining=0 reset=1700000060 retry-after=""
	// 429 limit=3 remaining=0 reset=1700000060 retry-after="20"
}

// Layer a per-endpoint limit on the per-IP and per-user limits every route
// shares. The payments route decides all three rules in one backend call:
// the request its own rule denies is not counted by the other two.
func ExampleMiddleware_With() {
	backend, _ := memstore.New(memstore.Config{Now: clock})
	ip, _ := keyfunc.IP(keyfunc.IPConfig{})
	user, _ := keyfunc.User(func(r *http.Request) (string, bool) {
		id := r.Header.Get("X-User") // in a real service: the authenticated user
		return id, id != ""
	})
	lim, err := redlimit.New(backend, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(100)},
		{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(60), MissingKey: redlimit.SkipMissingKey},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	api, err := middleware.New(lim, middleware.Config{
		Rules:   []middleware.Rule{{Name: "ip", Key: ip}, {Name: "user", Key: user}},
		Headers: headers.Writer{Style: headers.IETF},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer api.Close()
	payLim, err := lim.With(redlimit.Rule{Name: "payments", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2)})
	if err != nil {
		log.Fatal(err)
	}
	routeUser, _ := keyfunc.Join(keyfunc.Route(), user)
	payments, err := api.With(payLim, middleware.Rule{Name: "payments", Key: routeUser})
	if err != nil {
		log.Fatal(err)
	}

	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux := http.NewServeMux()
	mux.Handle("POST /payments", payments.Handler(ok))
	mux.Handle("GET /profile", api.Handler(ok))

	for _, target := range []string{"POST /payments", "POST /payments", "POST /payments", "GET /profile"} {
		var method, path string
		fmt.Sscan(target, &method, &path)
		r := httptest.NewRequest(method, path, nil)
		r.RemoteAddr = "203.0.113.7:50000"
		r.Header.Set("X-User", "alice")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Println(w.Code, target)
		fmt.Println("   ", w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 POST /payments
	//     "ip";r=99;t=1, "user";r=59;t=1, "payments";r=1;t=30
	// 200 POST /payments
	//     "ip";r=98;t=2, "user";r=58;t=2, "payments";r=0;t=60
	// 429 POST /payments
	//     "ip";r=98;t=2, "user";r=58;t=2, "payments";r=0;t=60
	// 200 GET /profile
	//     "ip";r=97;t=2, "user";r=57;t=3
}

// Decide inside a handler, for example to limit only the requests that
// reach an expensive branch.
func ExampleMiddleware_Check() {
	backend, _ := memstore.New(memstore.Config{Now: clock})
	apiKey, _ := keyfunc.Header("X-API-Key")
	lim, err := redlimit.New(backend, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "export", Algorithm: algorithms.TokenBucket, Limit: algorithms.PerHour(2)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		Rules:   []middleware.Rule{{Name: "export", Key: apiKey}},
		Headers: headers.Writer{Reset: headers.DeltaSeconds},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()

	export := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("format") != "pdf" {
			io.WriteString(w, "csv\n") // cheap: not limited
			return
		}
		d, err := mw.Check(r)
		if err != nil {
			log.Print(err) // the error policy has decided; d says what to do
		}
		mw.WriteHeaders(w.Header(), d)
		if !d.Allowed {
			http.Error(w, "export quota exceeded", http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "pdf\n")
	})

	for _, q := range []string{"pdf", "csv", "pdf", "pdf"} {
		r := httptest.NewRequest("GET", "/export?format="+q, nil)
		r.Header.Set("X-API-Key", "k-123")
		w := httptest.NewRecorder()
		export.ServeHTTP(w, r)
		fmt.Printf("%s: %d remaining=%q reset=%q retry-after=%q\n", q, w.Code,
			w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("X-RateLimit-Reset"), w.Header().Get("Retry-After"))
	}
	// Output:
	// pdf: 200 remaining="1" reset="1800" retry-after=""
	// csv: 200 remaining="" reset="" retry-after=""
	// pdf: 200 remaining="0" reset="3600" retry-after=""
	// pdf: 429 remaining="0" reset="3600" retry-after="1800"
}

// Layered rules on one chi route (docs/rules.md): a Redis backend, a per-IP and a per-user
// rule, mounted per route in chi. (Here Redis is an embedded miniredis,
// the clock is fixed and the Timeout long, so the output is reproducible
// on a loaded machine too; a real service passes its *redis.Client,
// leaves Now nil to use the Redis server's clock, and keeps the default
// Timeout.)
func ExampleMiddleware_Handler_chi() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()

	backend, err := redisstore.New(client, redisstore.Config{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	ip, err := keyfunc.IP(keyfunc.IPConfig{}) // behind a load balancer: TrustedProxies
	if err != nil {
		log.Fatal(err)
	}
	user, err := keyfunc.Header("X-User-ID") // use keyfunc.User with your authentication
	if err != nil {
		log.Fatal(err)
	}
	lim, err := redlimit.New(backend, redlimit.Config{
		Rules: []redlimit.Rule{
			{Name: "ip", Algorithm: algorithms.SlidingWindow, Limit: algorithms.PerMinute(1000)},
			{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(2), MissingKey: redlimit.SkipMissingKey},
		},
		Now:     clock,
		Timeout: 5 * time.Second, // miniredis under go test on a busy machine; a service keeps the default
	})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		Rules: []middleware.Rule{{Name: "ip", Key: ip}, {Name: "user", Key: user}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()

	r := chi.NewRouter()
	r.With(mw.Handler).Get("/api/profile", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "profile")
	})

	for range 3 {
		req := httptest.NewRequest("GET", "/api/profile", nil)
		req.Header.Set("X-User-ID", "alice")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Printf("%d remaining=%s retry-after=%q\n", w.Code, w.Header().Get("X-RateLimit-Remaining"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 remaining=1 retry-after=""
	// 200 remaining=0 retry-after=""
	// 429 remaining=0 retry-after="30"
}

// A support endpoint unblocks a client of the HTTP middleware: Limiter
// returns the middleware's Limiter, whose Reset forgets the client's keys
// in the store and in the Limiter's deny cache.
func ExampleMiddleware_Limiter() {
	backend, err := memstore.New(memstore.Config{Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	user, err := keyfunc.Header("X-User")
	if err != nil {
		log.Fatal(err)
	}
	lim, err := redlimit.New(backend, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "user", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1)}},
		Now:   clock,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{Rules: []middleware.Rule{{Name: "user", Key: user}}})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()
	api := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	get := func() int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("X-User", "alice")
		api.ServeHTTP(rec, req)
		return rec.Code
	}
	fmt.Println(get(), get())
	if err := mw.Limiter().Reset(context.Background(), "alice"); err != nil {
		log.Fatal(err)
	}
	fmt.Println(get())
	// Output:
	// 200 429
	// 200
}

func ExamplePerIP() {
	backend, _ := memstore.New(memstore.Config{Now: clock})
	mw, err := middleware.PerIP(backend, algorithms.GCRA, algorithms.PerMinute(2))
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()

	hello := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	}))
	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "203.0.113.7:50000"
		w := httptest.NewRecorder()
		hello.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
	// Output:
	// 200 1
	// 200 0
	// 429 0
}

func ExampleUnauthorized() {
	backend, _ := memstore.New(memstore.Config{Now: clock})
	mw, err := middleware.PerHeader(backend, "X-API-Key", algorithms.TokenBucket, algorithms.PerHour(1),
		middleware.WithConfig(middleware.Config{MissingKeyDenied: middleware.Unauthorized}))
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()

	api := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data\n")
	}))
	for _, key := range []string{"", "k-123", "k-123"} {
		r := httptest.NewRequest("GET", "/api/data", nil)
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		fmt.Printf("key %q: %d %s", key, w.Code, w.Body)
	}
	// Output:
	// key "": 401 unauthorized: no key for rule x-api-key
	// key "k-123": 200 data
	// key "k-123": 429 rate limit exceeded: x-api-key; retry in 3600s
}

func ExampleExemptCIDRs() {
	backend, _ := memstore.New(memstore.Config{Now: clock})
	proxies, err := keyfunc.ParseTrustedProxies("10.0.0.0/24") // the load balancers
	if err != nil {
		log.Fatal(err)
	}
	ipCfg := keyfunc.IPConfig{TrustedProxies: proxies}
	ip, err := keyfunc.IP(ipCfg)
	if err != nil {
		log.Fatal(err)
	}
	internal, err := middleware.ExemptCIDRs(ipCfg, netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("198.51.100.7/32"))
	if err != nil {
		log.Fatal(err)
	}
	admin := func(r *http.Request) bool {
		return subtle.ConstantTimeCompare([]byte(r.Header.Get("X-Admin-Key")), []byte("s3cret")) == 1
	}
	lim, err := redlimit.New(backend, redlimit.Config{Rules: []redlimit.Rule{
		{Name: "ip", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1)},
		{Name: "global", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMinute(1000)},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		Rules: []middleware.Rule{
			{Name: "ip", Key: ip, Exempt: admin},
			{Name: "global", Key: keyfunc.Const("all")},
		},
		Exempt: internal,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()

	api := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, c := range []struct{ name, xff, admin string }{
		{"office", "10.1.2.3", ""},
		{"office", "10.1.2.3", ""},
		{"client", "203.0.113.9", ""},
		{"client", "203.0.113.9", ""},
		{"forger", "10.1.2.3, 203.0.113.9", ""}, // the proxy appended the real address
		{"admin", "203.0.113.50", "s3cret"},
		{"admin", "203.0.113.50", "s3cret"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.2:40000" // the load balancer
		r.Header.Set("X-Forwarded-For", c.xff)
		if c.admin != "" {
			r.Header.Set("X-Admin-Key", c.admin)
		}
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		fmt.Printf("%s: %d limit=%q\n", c.name, w.Code, w.Header().Get("X-RateLimit-Limit"))
	}
	// Output:
	// office: 200 limit=""
	// office: 200 limit=""
	// client: 200 limit="1"
	// client: 429 limit="1"
	// forger: 429 limit="1"
	// admin: 200 limit="1000"
	// admin: 200 limit="1000"
}

func ExampleRule_limitFunc() {
	backend, _ := memstore.New(memstore.Config{Now: clock})
	plans := map[string]algorithms.Limit{"free": algorithms.PerMinute(1), "pro": algorithms.PerMinute(100)}
	customer, _ := keyfunc.Header("X-Customer")
	lim, err := redlimit.New(backend, redlimit.Config{
		// the free plan for callers without a request (lim.Allow); HTTP
		// requests get the limit of their X-Plan
		Rules:   []redlimit.Rule{{Name: "plan", Algorithm: algorithms.FixedWindow, Limit: plans["free"]}},
		OnError: redlimit.FailClosed,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer lim.Close()
	mw, err := middleware.New(lim, middleware.Config{
		Rules: []middleware.Rule{{
			Name: "plan", Key: customer,
			LimitFunc: func(r *http.Request) (algorithms.Limit, error) {
				l, ok := plans[r.Header.Get("X-Plan")]
				if !ok {
					return algorithms.Limit{}, fmt.Errorf("unknown plan %q", r.Header.Get("X-Plan"))
				}
				return l, nil
			},
		}},
		OnDecision: func(r *http.Request, d *redlimit.Decision) {
			if d.Err != nil {
				fmt.Println("   ", d.Err)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer mw.Close()

	api := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, c := range []struct{ customer, plan string }{
		{"acme", "free"}, {"acme", "free"}, {"globex", "pro"}, {"acme", "pro"}, {"initech", "gold"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Customer", c.customer)
		r.Header.Set("X-Plan", c.plan)
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		fmt.Printf("%s on %s: %d limit=%q remaining=%q\n", c.customer, c.plan, w.Code,
			w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Remaining"))
	}
	// Output:
	// acme on free: 200 limit="1" remaining="0"
	// acme on free: 429 limit="1" remaining="0"
	// globex on pro: 200 limit="100" remaining="99"
	// acme on pro: 200 limit="100" remaining="98"
	//     redlimit: rule "plan": LimitFunc failed: unknown plan "gold"
	// initech on gold: 503 limit="" remaining=""
}

// An outbound pacer: a client that sends at most 10 requests a second to
// each host, one every 100ms, from any number of goroutines (and, on a
// redisstore, from every instance together). The clock is injected here
// so the output is exact; a service leaves Now and Sleep unset.
func ExampleNewTransport() {
	start := time.Unix(1_700_000_000, 0)
	now := start
	mem, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		panic(err)
	}
	e, err := redlimit.New(mem, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "partner", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(10).WithBurst(1)}},
		Sleep: func(_ context.Context, d time.Duration) error { now = now.Add(d); return nil },
	})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	pacer, err := middleware.NewTransport(e, middleware.TransportConfig{}) // keyed by host
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: pacer}

	partner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Printf("%s at +%v\n", r.URL.Path, now.Sub(start))
	}))
	defer partner.Close()
	for _, path := range []string{"/a", "/b", "/c", "/d"} {
		resp, err := client.Get(partner.URL + path)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
	}
	// Output:
	// /a at +0s
	// /b at +100ms
	// /c at +200ms
	// /d at +300ms
}
