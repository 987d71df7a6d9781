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
//	-redis URL     Redis (default $REDIS_URL, else redis://127.0.0.1:6379/0); a
//	               cluster is detected (INFO cluster) and every master scanned;
//	               more seed nodes: redis://host:port?addr=host2:port2
//	-cluster       the Redis is a cluster (detected without it)
//	-prefix P      the services' key prefix (default "rate", redlimit.Config.Prefix)
//	-admin URLS    admin endpoints (middleware/admin), comma-separated: the rules'
//	               algorithms and limits for peek, reset and top; what watch polls
//	-token T       the admin endpoints' token (default $REDLIMIT_ADMIN_TOKEN)
//	-json          JSON output instead of a table
//
// A storage key is "<prefix>:<rule>:<algorithm tag>:{<key material>}": to
// read a key, peek and top need the rule's algorithm and limit. They come
// from the admin endpoint's rule list (-admin), or from the command's
// -alg and -limit flags ("-alg gcra -limit 100/1m -burst 20"), which take
// precedence. reset needs the algorithm, and for a fixed window rule
// whether it has quota blocks (-blocks or -blocks=false; the admin
// endpoint says): its keys are then reset through the engine's epochs,
// with the limit. See docs/admin.md.
//
// Keys are printed as they are stored, quoted (Go syntax) when they hold
// a byte that is not printable. Exit codes: 0 done, 1 failed (Redis, an
// endpoint), 2 bad usage.
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
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
	fs.BoolVar(&g.cluster, "cluster", false, "the Redis is a cluster (detected without it; seeds: -redis redis://host:port?addr=host2:port2)")
	fs.StringVar(&g.prefix, "prefix", "rate", "the key prefix of the services (redlimit.Config.Prefix)")
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
	if g.prefix == "" || strings.ContainsAny(g.prefix, "{} \t\r\n") {
		fmt.Fprintf(stderr, "redlimit: -prefix %s: must be non-empty, without braces or spaces\n", strconv.Quote(g.prefix))
		return 2
	}
	cmds := map[string]func(context.Context, *global, []string) error{
		"peek": cmdPeek, "reset": cmdReset, "top": cmdTop, "watch": cmdWatch,
	}
	cmd, ok := cmds[fs.Arg(0)]
	if !ok {
		fmt.Fprintf(stderr, "redlimit: unknown command %s\n", strconv.Quote(fs.Arg(0)))
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
		fmt.Fprintln(stderr, "redlimit "+fs.Arg(0)+":", show(err.Error()))
		return 2
	default:
		fmt.Fprintln(stderr, "redlimit "+fs.Arg(0)+":", show(err.Error()))
		return 1
	}
}

// usageError is a mistake on the command line (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// parseFlags parses a command's flags: a mistake is bad usage (the flag
// package has printed it and the command's usage), -h is not.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return usageError{err.Error()}
}

// client returns the Redis client of g: a cluster client when -cluster
// says so, when the URL names several seeds, or when the node it names
// says it is in a cluster (INFO cluster: cluster_enabled:1), so that
// commands reach every master, and keys in any slot, without -cluster.
func (g *global) client(ctx context.Context) (redis.UniversalClient, error) {
	url := g.redisURL
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	copt, err := redis.ParseClusterURL(url)
	if err != nil {
		return nil, usagef("-redis %s: %v", strconv.Quote(url), err)
	}
	opt, err := redis.ParseURL(url)
	if g.cluster || err != nil && len(copt.Addrs) > 1 {
		return redis.NewClusterClient(copt), nil
	}
	if err != nil {
		return nil, usagef("-redis %s: %v", strconv.Quote(url), err)
	}
	c := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", opt.Addr, err)
	}
	if infoField(info, "cluster_enabled") != "1" {
		return c, nil
	}
	c.Close()
	return redis.NewClusterClient(copt), nil
}

// infoField returns the value of field in the reply of INFO.
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// show returns s as the terminal may print it: as it is when every rune is
// printable (and it does not start with a quote), else quoted in Go
// syntax, so that no control byte (an escape sequence) reaches the
// terminal and two keys never look alike.
func show(s string) string {
	if s != "" && s[0] != '"' && utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return s
	}
	return strconv.Quote(s)
}

// emit writes v as one line of JSON.
func (g *global) emit(v any) error {
	return json.NewEncoder(g.stdout).Encode(v)
}
