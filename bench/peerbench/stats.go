package main

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// counter is a go-redis hook counting what the client sends: one round trip
// per command, or per pipeline whatever its length, and every command by
// name. It is how round trips are counted: exactly, on the client side.
type counter struct {
	trips atomic.Int64
	names sync.Map // command name -> *atomic.Int64
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.trips.Add(1)
		c.add(cmd.Name())
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.trips.Add(1)
		for _, cmd := range cmds {
			c.add(cmd.Name())
		}
		return next(ctx, cmds)
	}
}

func (c *counter) add(name string) {
	v, ok := c.names.Load(name)
	if !ok {
		v, _ = c.names.LoadOrStore(name, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

func (c *counter) reset() {
	c.trips.Store(0)
	c.names.Range(func(_, v any) bool { v.(*atomic.Int64).Store(0); return true })
}

// sent returns the round trips and the commands by name since reset.
func (c *counter) sent() (int64, map[string]int64) {
	m := map[string]int64{}
	c.names.Range(func(k, v any) bool { m[k.(string)] = v.(*atomic.Int64).Load(); return true })
	return c.trips.Load(), m
}

// resetStats zeroes the server's command statistics and returns its CPU
// time so far.
func (e *env) resetStats(ctx context.Context) (float64, error) {
	if err := e.admin.ConfigResetStat(ctx).Err(); err != nil {
		return 0, err
	}
	info, err := e.info(ctx, "cpu")
	if err != nil {
		return 0, err
	}
	return cpuSeconds(info), nil
}

// notCounted are the commands of this program's admin client and of
// go-redis's connection setup; they are no limiter's work.
var notCounted = map[string]bool{"info": true, "config|resetstat": true, "hello": true, "client|setinfo": true, "select": true, "ping": true}

// scriptCmds run scripts: their usec already includes the commands the
// script ran, which commandstats also counts under their own names.
var scriptCmds = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}

// readStats fills r's server and client counts. A command name may be both
// sent by the client and run inside a script (throttled's GET); its usec is
// then split in proportion to the calls the client sent.
func (e *env) readStats(ctx context.Context, r *runResult, cpu0 float64) error {
	info, err := e.info(ctx, "commandstats", "cpu")
	if err != nil {
		return err
	}
	r.cpu = cpuSeconds(info) - cpu0
	trips, sent := e.counter.sent()
	r.trips = trips
	for _, n := range sent {
		r.sent += n
	}
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok || notCounted[name] {
			continue
		}
		calls, usec := statField(v, "calls"), statField(v, "usec")
		r.srvCalls += int64(calls)
		switch {
		case scriptCmds[name]:
			r.srvUsec += usec
		case calls > 0:
			r.srvUsec += usec * min(float64(sent[name]), calls) / calls
		}
	}
	return nil
}

// info returns the fields of INFO sections as a map.
func (e *env) info(ctx context.Context, sections ...string) (map[string]string, error) {
	s, err := e.admin.Info(ctx, sections...).Result()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for line := range strings.Lines(s) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

func cpuSeconds(info map[string]string) float64 {
	u, _ := strconv.ParseFloat(info["used_cpu_user"], 64)
	s, _ := strconv.ParseFloat(info["used_cpu_sys"], 64)
	return u + s
}

// statField reads one field of a commandstats value such as
// "calls=3,usec=12,usec_per_call=4.00,...".
func statField(v, field string) float64 {
	for kv := range strings.SplitSeq(v, ",") {
		if k, val, _ := strings.Cut(kv, "="); k == field {
			f, _ := strconv.ParseFloat(val, 64)
			return f
		}
	}
	return 0
}
