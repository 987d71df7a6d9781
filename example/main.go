// Command example is a small web service limited by redlimit, the way the
// seed scenario describes: per client IP, per user, and per user on the
// order and payment endpoints, decided together in one Redis round trip.
//
//	go run ./example                      # embedded miniredis, chi router
//	go run ./example -mux=std             # same routes on net/http's ServeMux
//	REDIS_URL=redis://127.0.0.1:6379/0 go run ./example
//	REDIS_CLUSTER_ADDRS=127.0.0.1:7000,127.0.0.1:7001 go run ./example
//
// The admin page of the limiters (package middleware/admin) listens on a
// second port, loopback only (-admin-addr, default 127.0.0.1:8081), at
// /debug/redlimit/, behind a token: $REDLIMIT_ADMIN_TOKEN, or a random
// one printed at start.
//
// The X-User-ID request header stands in for authentication: this demo
// believes whatever user a client claims. A real service takes the user from
// its authentication middleware (keyfunc.User reads it from the request).
//
// Routes and limits:
//
//	GET  /healthz       never limited
//	GET  /api/profile   per client IP 1000/min, per user 100/min
//	POST /api/orders    the same two, plus 10/min per user on orders
//	POST /api/payments  the same two, plus 5/min per user on payments
//
// Anonymous requests (no X-User-ID) are limited by IP only.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/keyfunc"
	"github.com/redlimit/redlimit/middleware/admin"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", envOr("ADDR", "127.0.0.1:8080"), "listen address (env ADDR)")
	mux := flag.String("mux", "chi", "router: chi or std (net/http ServeMux)")
	proxies := flag.String("trusted-proxies", "", "comma-separated CIDRs of proxies whose X-Forwarded-For is believed (default: none)")
	verbose := flag.Bool("v", false, "log every rate-limit decision (debug level)")
	adminAddr := flag.String("admin-addr", envOr("ADMIN_ADDR", "127.0.0.1:8081"), "listen address of the admin page, loopback only (env ADMIN_ADDR)")
	flag.Parse()

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	client, where, cleanup, err := redisClient()
	if err != nil {
		return err
	}
	defer cleanup()
	backend, err := redisstore.New(client, redisstore.Config{})
	if err != nil {
		return err
	}
	trusted, err := keyfunc.ParseTrustedProxies(splitList(*proxies)...)
	if err != nil {
		return err
	}
	token := os.Getenv("REDLIMIT_ADMIN_TOKEN")
	if token == "" {
		var b [12]byte
		rand.Read(b[:])
		token = hex.EncodeToString(b[:])
	}
	adm, err := admin.New(admin.Config{Authorize: admin.Token(token), Logger: logger})
	if err != nil {
		return err
	}
	defer adm.Close()
	src, err := adm.Source("example")
	if err != nil {
		return err
	}
	app, err := newApp(backend, trusted, logger, src)
	if err != nil {
		return err
	}
	defer app.Close()
	adminLn, err := listenLoopback(*adminAddr)
	if err != nil {
		return fmt.Errorf("-admin-addr: %w", err)
	}
	adminMux := http.NewServeMux()
	adminMux.Handle("/debug/redlimit/", adm)
	adminSrv := &http.Server{Handler: adminMux, ReadHeaderTimeout: 5 * time.Second}
	go adminSrv.Serve(adminLn)
	defer adminSrv.Close()
	var handler http.Handler
	switch *mux {
	case "chi":
		handler = app.chiRouter()
	case "std":
		handler = app.stdMux()
	default:
		return fmt.Errorf("-mux must be chi or std, got %q", *mux)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	fmt.Printf("redlimit example listening on http://%s (router %s, Redis: %s)\n", ln.Addr(), *mux, where)
	if len(trusted) > 0 {
		fmt.Printf("trusting X-Forwarded-For from %v\n", trusted)
	}
	fmt.Printf("try: curl -i -H 'X-User-ID: alice' -X POST http://%s/api/payments\n", ln.Addr())
	fmt.Printf("admin page: http://%s/debug/redlimit/ (any user name, password %s)\n", adminLn.Addr(), token)
	fmt.Printf("       or: curl -H 'Authorization: Bearer %s' 'http://%s/debug/redlimit/?format=json'\n", token, adminLn.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Println("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// redisClient returns the Redis the service uses: a cluster from
// REDIS_CLUSTER_ADDRS, a server from REDIS_URL, or an embedded miniredis.
func redisClient() (redis.UniversalClient, string, func(), error) {
	fast := func(o *redis.Options) {
		// Fail fast: the middleware's error policy handles outages.
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = 200*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond
		o.MaxRetries = -1
		// Return by the middleware's deadline: then it calls Redis
		// directly instead of in a goroutine it can abandon.
		o.ContextTimeoutEnabled = true
	}
	if addrs := splitList(os.Getenv("REDIS_CLUSTER_ADDRS")); len(addrs) > 0 {
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: addrs, DialTimeout: 200 * time.Millisecond, ReadTimeout: 100 * time.Millisecond,
			WriteTimeout: 100 * time.Millisecond, PoolTimeout: 100 * time.Millisecond, ContextTimeoutEnabled: true,
		})
		return c, "cluster " + strings.Join(addrs, ","), func() { c.Close() }, nil
	}
	if url := os.Getenv("REDIS_URL"); url != "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, "", nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		fast(opt)
		c := redis.NewClient(opt)
		return c, opt.Addr, func() { c.Close() }, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, "", nil, err
	}
	opt := &redis.Options{Addr: mr.Addr()}
	fast(opt)
	c := redis.NewClient(opt)
	return c, "embedded miniredis at " + mr.Addr() + " (set REDIS_URL for a real Redis)", func() { c.Close(); mr.Close() }, nil
}

// listenLoopback listens on addr, which must be a loopback address: the
// admin page is for the machine's operators, never the Internet.
func listenLoopback(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if ip, err := netip.ParseAddr(host); host != "localhost" && (err != nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("%q is not a loopback address (127.0.0.1, [::1], localhost)", addr)
	}
	return net.Listen("tcp", addr)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
