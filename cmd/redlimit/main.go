// Command redlimit looks at and steers the rate limits a redlimit service
// keeps in Redis, and watches its admin endpoints.
//
//	redlimit [global flags] peek  RULE KEY   the key's state under the rule, consuming nothing
//	redlimit [global flags] reset RULE KEY   forget the key's state: full capacity again
//	redlimit [global flags] top              the keys nearest their limit (SCAN, rate-bounded)
//	redlimit [global flags] watch            decisions per second per rule, from admin endpoints
//
// Global flags:
//
//	-redis URL     Redis (default $REDIS_URL, else redis://127.0.0.1:6379/0);
//	               with -cluster, a cluster: redis://host:port?addr=host2:port2
//	-cluster       the Redis is a cluster
//	-prefix P      the services' key prefix (default "rate", engine.Config.Prefix)
//	-admin URLS    admin endpoints (middleware/admin), comma-separated: the rules'
//	               algorithms and limits for peek, reset and top; what watch polls
//	-token T       the admin endpoints' token (default $REDLIMIT_ADMIN_TOKEN)
//	-json          JSON output instead of a table
//
// A storage key is "<prefix>:<rule>:<algorithm tag>:{<key material>}": to
// read a key, peek and top need the rule's algorithm and limit. They come
// from the admin endpoint's rule list (-admin), or from the command's
// -alg and -limit flags ("-alg gcra -limit 100/1m -burst 20"), which take
// precedence. reset needs only the algorithm. See docs/admin.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Seams for tests: the clock of the checks and of watch, and watch's sleep.
var (
	clock     func() time.Time // nil: the Redis server's clock (TIME)
	wallClock = time.Now
	sleep     = func(ctx context.Context, d time.Duration) error {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
)

// global is what every command shares.
type global struct {
	redisURL string
	cluster  bool
	prefix   string
	admin    []string
	token    string
	json     bool
	stdout   io.Writer
	stderr   io.Writer
}

const usage = `usage: redlimit [global flags] COMMAND [flags] [ARGS]

commands:
  peek  RULE KEY   the key's state under the rule, consuming nothing
  reset RULE KEY   forget the key's state under the rule
  top              the keys nearest their limit (SCAN at a bounded rate, every master)
  watch            decisions per second per rule, polled from admin endpoints

global flags:
`

// run is main without the process: it returns the exit code (0 done, 1
// failed, 2 bad usage).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	g := &global{stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("redlimit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var admins string
	fs.StringVar(&g.redisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL (default $REDIS_URL, else redis://127.0.0.1:6379/0)")
	fs.BoolVar(&g.cluster, "cluster", false, "the Redis is a cluster (-redis redis://host:port?addr=host2:port2)")
	fs.StringVar(&g.prefix, "prefix", "rate", "the key prefix of the services (engine.Config.Prefix)")
	fs.StringVar(&admins, "admin", "", "admin endpoint URLs, comma-separated: rule definitions, and what watch polls")
	fs.StringVar(&g.token, "token", os.Getenv("REDLIMIT_ADMIN_TOKEN"), "token of the admin endpoints (default $REDLIMIT_ADMIN_TOKEN)")
	fs.BoolVar(&g.json, "json", false, "JSON output")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	for a := range strings.SplitSeq(admins, ",") {
		if a = strings.TrimSpace(a); a != "" {
			g.admin = append(g.admin, a)
		}
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	cmds := map[string]func(context.Context, *global, []string) error{
		"peek": cmdPeek, "reset": cmdReset, "top": cmdTop, "watch": cmdWatch,
	}
	cmd, ok := cmds[fs.Arg(0)]
	if !ok {
		fmt.Fprintf(stderr, "redlimit: unknown command %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	err := cmd(ctx, g, fs.Args()[1:])
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "redlimit "+fs.Arg(0)+":", err)
		return 2
	default:
		fmt.Fprintln(stderr, "redlimit "+fs.Arg(0)+":", err)
		return 1
	}
}

// usageError is a mistake on the command line (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// client returns the Redis client of g.
func (g *global) client() (redis.UniversalClient, error) {
	url := g.redisURL
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	if g.cluster {
		opt, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, fmt.Errorf("-redis: %w", err)
		}
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("-redis: %w", err)
	}
	return redis.NewClient(opt), nil
}

// emit writes v as one line of JSON.
func (g *global) emit(v any) error {
	return json.NewEncoder(g.stdout).Encode(v)
}
