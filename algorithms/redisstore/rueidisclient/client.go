// Package rueidisclient runs redlimit's Redis store on a rueidis client
// (github.com/redis/rueidis) instead of a go-redis one.
//
// It lives in a module of its own: a service that limits with go-redis
// compiles no rueidis. A [Client] adapts a rueidis.Client to what
// redisstore.New takes (redis.Scripter, and DEL for Reset) and to the
// store's internal pipelining seam, so the store sends the same scripts,
// pipelines and batches concurrent checks as it does on a *redis.Client,
// and decides exactly as it does there. A check sent at once goes
// through [Client.RunScript], a rueidis command built directly, with no
// go-redis command made for it:
//
//	rc, err := rueidis.NewClient(rueidis.ClientOption{
//		InitAddress:           []string{"127.0.0.1:6379"},
//		DisableAutoPipelining: true, // the store pipelines itself
//		DisableCache:          true, // no client-side caching: nothing to cache
//	})
//	c, err := rueidisclient.New(rc)
//	store, err := redisstore.New(c, redisstore.Config{})
//
// # Why
//
// A check that finds a round trip free is sent at once, on the caller's
// goroutine; rueidis's round trip costs the application less CPU than
// go-redis's (no health-check syscall on each connection checkout, no
// deadlines set per command), so at low concurrency a check through it is
// faster while the client runs warm, and under concurrency the store's
// batching works as on go-redis. See docs/performance.md ("The store on
// rueidis") for the figures, the machine, and how much of the gain is
// left when each check runs amid other work.
//
// Set DisableAutoPipelining: with it, each round trip takes a connection
// of its own and runs on the caller's goroutine. Without it, rueidis
// queues concurrent commands for background goroutines on one connection,
// and once it has (or as soon as a context without a deadline can be
// cancelled, as an HTTP request's can), every call pays two goroutine
// handoffs: slower than go-redis at one caller. Both are exact.
//
// rueidis retries only read-only commands after a broken connection, and
// EVALSHA and EVAL are not (their builders mark no command read-only, nor
// does the store's), so a script is never sent twice, as the store sends
// none twice through go-redis. A call returns by its context's deadline (the
// limiter calls the store directly, without a guard goroutine); as on any client, a check whose deadline passed after it
// was sent may still have been counted.
//
// # What it does not do
//
//   - A Redis Cluster client (rueidis in cluster mode) is refused: a layered
//     call whose keys live in different hash slots needs the store's
//     sharding, which is written for go-redis's *redis.ClusterClient.
//     Sentinel and single-server clients are fine.
//   - redisstore.Config.Replicas (WAIT after each script) needs a go-redis
//     client; New of the store says so.
package rueidisclient

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore/internal/batching"
	"github.com/redlimit/redlimit/internal/contract"
)

// Client adapts a rueidis.Client to the store: pass it to redisstore.New.
// It implements redis.Scripter, DEL and the store's pipelining seam
// (Process, Batch, RunScript); closing the rueidis client is the
// caller's.
type Client struct {
	carrier // HonoursDeadline: a rueidis call returns by its context's deadline
	c       rueidis.Client
}

// carrier holds what a Client tells the store about itself.
type carrier = contract.Carrier

var _ redis.Scripter = (*Client)(nil)

// New returns a Client on c, a single-server or Sentinel rueidis client.
func New(c rueidis.Client) (*Client, error) {
	switch {
	case c == nil:
		return nil, &algorithms.ConfigError{Field: "client", Reason: "must not be nil"}
	case c.Mode() == rueidis.ClientModeCluster:
		return nil, &algorithms.ConfigError{Field: "client", Reason: "a rueidis cluster client is not supported: use go-redis's *redis.ClusterClient"}
	}
	return &Client{carrier: contract.Carry(contract.Traits{HonoursDeadline: true}), c: c}, nil
}

var _ batching.Batcher = (*Client)(nil)

// Process sends cmd, a command of the store (EVALSHA or EVAL, as a
// *redis.IntSliceCmd or a *redis.Cmd), and sets its reply or error: with
// Batch, it makes c a batching.Batcher, on which the store pipelines
// and batches as on a *redis.Client.
func (c *Client) Process(ctx context.Context, cmd redis.Cmder) error {
	m, err := c.c.Do(ctx, c.build(cmd)).ToMessage()
	setReply(cmd, m, err)
	return cmd.Err()
}

var _ batching.ScriptRunner = (*Client)(nil)

// RunScript sends one script call, EVALSHA of the digest script or EVAL
// of its source, and reads its reply, an array of integers, as the store
// wants it: the store's calls that find a round trip free come here.
func (c *Client) RunScript(ctx context.Context, eval bool, script string, keys []string, args []any) ([]int64, error) {
	var buf [8]string
	as := appendStrs(buf[:0], args)
	var cmd rueidis.Completed
	if eval {
		cmd = c.c.B().Eval().Script(script).Numkeys(int64(len(keys))).Key(keys...).Arg(as...).Build()
	} else {
		cmd = c.c.B().Evalsha().Sha1(script).Numkeys(int64(len(keys))).Key(keys...).Arg(as...).Build()
	}
	ms, err := c.c.Do(ctx, cmd).ToArray()
	if err != nil {
		return nil, convErr(err)
	}
	vals := make([]int64, len(ms))
	for i := range ms {
		if vals[i], err = ms[i].AsInt64(); err != nil {
			return nil, convErr(err)
		}
	}
	return vals, nil
}

// Batch returns an empty batch of commands, sent in one round trip by
// its Exec (rueidis's DoMulti).
func (c *Client) Batch() batching.Batch { return &batch{c: c} }

// batch is the commands of one round trip.
type batch struct {
	c    *Client
	cmds []redis.Cmder
	b    rueidis.Commands
}

func (b *batch) Process(_ context.Context, cmd redis.Cmder) error {
	b.cmds = append(b.cmds, cmd)
	b.b = append(b.b, b.c.build(cmd))
	return nil
}

// Exec sends the batch and sets each command's reply; it returns the
// commands and the first of their errors.
func (b *batch) Exec(ctx context.Context) ([]redis.Cmder, error) {
	if len(b.b) == 0 {
		return nil, nil
	}
	var first error
	for i, res := range b.c.c.DoMulti(ctx, b.b...) {
		m, err := res.ToMessage()
		setReply(b.cmds[i], m, err)
		if err := b.cmds[i].Err(); err != nil && first == nil {
			first = err
		}
	}
	cmds := b.cmds
	b.cmds, b.b = nil, nil
	return cmds, first
}

// build makes a rueidis command of cmd's arguments.
func (c *Client) build(cmd redis.Cmder) rueidis.Completed {
	return c.c.B().Arbitrary(strs(cmd.Args())...).Build()
}

// setReply sets m, or err when the reply did not arrive, as cmd's reply,
// read as go-redis reads it for cmd's type: a *redis.IntSliceCmd or a
// *redis.Cmd.
func setReply(cmd redis.Cmder, m rueidis.RedisMessage, err error) {
	if err != nil {
		cmd.SetErr(convErr(err))
		return
	}
	switch cmd := cmd.(type) {
	case *redis.IntSliceCmd:
		ms, err := m.ToArray()
		if err != nil {
			cmd.SetErr(convErr(err))
			return
		}
		v := make([]int64, len(ms))
		for i := range ms {
			if v[i], err = ms[i].AsInt64(); err != nil {
				cmd.SetErr(convErr(err))
				return
			}
		}
		cmd.SetVal(v)
	case *redis.Cmd:
		v, err := m.ToAny()
		if err != nil {
			cmd.SetErr(convErr(err))
			return
		}
		if vs, ok := v.([]any); ok { // an error in an array, as go-redis gives it
			for i, e := range vs {
				if err, ok := e.(error); ok {
					vs[i] = convErr(err)
				}
			}
		}
		cmd.SetVal(v)
	default:
		cmd.SetErr(fmt.Errorf("rueidisclient: %T is not a command of the store", cmd))
	}
}

// EvalSha runs the script of digest sha1 (EVALSHA).
func (c *Client) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return c.script(ctx, scriptCmd(ctx, "evalsha", sha1, keys, args))
}

// Eval runs script (EVAL), which also caches it on the server.
func (c *Client) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.script(ctx, scriptCmd(ctx, "eval", script, keys, args))
}

// EvalShaRO runs the read-only script of digest sha1 (EVALSHA_RO).
func (c *Client) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return c.script(ctx, scriptCmd(ctx, "evalsha_ro", sha1, keys, args))
}

// EvalRO runs the read-only script (EVAL_RO).
func (c *Client) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.script(ctx, scriptCmd(ctx, "eval_ro", script, keys, args))
}

// script sends cmd as Process does and returns it.
func (c *Client) script(ctx context.Context, cmd *redis.Cmd) *redis.Cmd {
	_ = c.Process(ctx, cmd)
	return cmd
}

// scriptCmd is the command of a script call as go-redis builds it: name
// (EVALSHA, EVAL, or their _RO forms), the digest or the source, the
// number of keys, the keys, the arguments.
func scriptCmd(ctx context.Context, name, first string, keys []string, args []any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, first, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	return redis.NewCmd(ctx, append(a, args...)...)
}

// ScriptExists reports which of the digests the server has cached.
func (c *Client) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	cmd := redis.NewBoolSliceCmd(ctx)
	ms, err := c.c.Do(ctx, c.c.B().ScriptExists().Sha1(hashes...).Build()).ToArray()
	if err != nil {
		cmd.SetErr(convErr(err))
		return cmd
	}
	v := make([]bool, len(ms))
	for i := range ms {
		n, err := ms[i].AsInt64()
		if err != nil {
			cmd.SetErr(convErr(err))
			return cmd
		}
		v[i] = n == 1
	}
	cmd.SetVal(v)
	return cmd
}

// ScriptLoad caches script on the server and returns its digest.
func (c *Client) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	cmd := redis.NewStringCmd(ctx)
	s, err := c.c.Do(ctx, c.c.B().ScriptLoad().Script(script).Build()).ToString()
	if err != nil {
		cmd.SetErr(convErr(err))
		return cmd
	}
	cmd.SetVal(s)
	return cmd
}

// Del deletes keys (DEL), for the store's Reset.
func (c *Client) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx)
	n, err := c.c.Do(ctx, c.c.B().Del().Key(keys...).Build()).AsInt64()
	if err != nil {
		cmd.SetErr(convErr(err))
		return cmd
	}
	cmd.SetVal(n)
	return cmd
}

// serverError is an error reply of the server, as a redis.Error: the
// store and go-redis tell a server's errors (NOSCRIPT, WRONGTYPE, a Lua
// error) from the network's by that interface.
type serverError string

func (e serverError) Error() string { return string(e) }

// RedisError marks serverError as a redis.Error.
func (serverError) RedisError() {}

// convErr returns err as go-redis would: redis.Nil for a nil reply, a
// redis.Error for the server's error replies, anything else unchanged.
func convErr(err error) error {
	if rueidis.IsRedisNil(err) {
		return redis.Nil
	}
	var re *rueidis.RedisError
	if errors.As(err, &re) {
		return serverError(re.Error())
	}
	return err
}

// strs formats a command's arguments as go-redis writes them (the store's
// are strings, int64 and int).
func strs(args []any) []string {
	return appendStrs(make([]string, 0, len(args)), args)
}

// appendStrs appends args, formatted as strs formats them, to out.
func appendStrs(out []string, args []any) []string {
	for _, a := range args {
		out = append(out, str(a))
	}
	return out
}

func str(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	}
	return fmt.Sprint(a) // not an argument of the store's
}
