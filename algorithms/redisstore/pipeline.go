package redisstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms/redisstore/internal/batching"
	"github.com/redlimit/redlimit/internal/hashslot"
)

// DefaultPipelines is how many round trips a [Store] has in flight at most
// before calls queue, when [Config].Pipelines is 0.
const DefaultPipelines = 4

// maxBatch bounds the scripts of one pipeline, so that a flood of callers
// is served by every pipeline in flight rather than by one huge write.
const maxBatch = 256

// maxQueued bounds the calls waiting for a round trip in one pipeline (a
// Store's, or on a Ring a shard's): a call that finds that many queued
// fails at once with errQueueFull rather than wait behind them, so that
// a Redis that stopped answering does not make the queue, and the memory
// it holds, grow with every caller. A queue that long is 16 pipelines of
// maxBatch calls: with every round trip in flight, the last would wait
// for 4 rounds of DefaultPipelines.
const maxQueued = 4096

// errQueueFull is the error of a call that found maxQueued calls queued.
var errQueueFull = fmt.Errorf("redlimit: %d calls already wait for a round trip to Redis: not queued", maxQueued)

// pipeline shares round trips between concurrent calls (see the package
// doc, "Pipelining"). inflight counts the round trips under way, each made
// by a caller itself or by a goroutine sending the queue; the queue is not
// empty only while inflight is max, and whoever ends a round trip hands
// its place to a goroutine that sends the queue, if there is one.
type pipeline struct {
	client  batching.Batcher
	max     int
	cluster bool // calls are batched per hash slot

	mu       sync.Mutex
	queue    []*call // not empty only while max round trips are in flight; at most maxQueued
	inflight int
}

// goRedisBatcher is a go-redis client that pipelines as a batching.Batcher:
// *redis.Client, and *redis.ClusterClient, whose pipelines send each node
// its commands, concurrently, following MOVED and ASK. It sends every
// script of the store at most once, alone or in a pipeline (see once).
type goRedisBatcher struct {
	c interface {
		Process(ctx context.Context, cmd redis.Cmder) error
		Pipeline() redis.Pipeliner
	}
}

func (g goRedisBatcher) Process(ctx context.Context, cmd redis.Cmder) error {
	return g.c.Process(ctx, once(cmd))
}

func (g goRedisBatcher) Batch() batching.Batch { return goRedisBatch{g.c.Pipeline()} }

// goRedisBatch is a go-redis pipeline whose scripts go-redis sends at
// most once: a pipeline holding one is never sent again.
type goRedisBatch struct{ p redis.Pipeliner }

func (g goRedisBatch) Process(ctx context.Context, cmd redis.Cmder) error {
	return g.p.Process(ctx, once(cmd))
}

func (g goRedisBatch) Exec(ctx context.Context) ([]redis.Cmder, error) { return g.p.Exec(ctx) }

// call is one script waiting in the queue.
type call struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	batch  int // its batch kind (see batchKind), 0 if it is not batched
	n      int // with batch: its number of checks
	slot   int // with batch, on a cluster: the hash slot of its keys

	vals []int64
	err  error
	done chan struct{} // receives once the call is answered
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// run runs script with keys and args and returns its reply. A call that
// finds every round trip in flight queues, unless maxQueued calls do
// already: it then fails at once with errQueueFull. A queued call whose
// context ends leaves the queue: it is not sent, and nobody waits for it.
func (p *pipeline) run(ctx context.Context, script *redis.Script, keys []string, args []any) ([]int64, error) {
	p.mu.Lock()
	if p.inflight < p.max {
		return p.runLocked(ctx, script, keys, args)
	}
	if len(p.queue) >= maxQueued {
		p.mu.Unlock()
		return nil, errQueueFull
	}
	c := calls.Get().(*call)
	c.ctx, c.script, c.keys, c.args = ctx, script, keys, args
	c.batch, c.n = batchKind(script, keys, args)
	if p.cluster && c.batch != 0 {
		c.slot = hashslot.Of(keys[0])
	}
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		if p.leave(c) {
			*c = call{done: c.done}
			calls.Put(c)
			return nil, ctx.Err()
		}
		select {
		case <-c.done: // answered meanwhile
		default:
			// Abandoned in a pipeline under way: it answers nobody,
			// and the call is never reused.
			return nil, ctx.Err()
		}
	}
	vals, err := c.vals, c.err
	*c = call{done: c.done}
	calls.Put(c)
	if err == errAlone {
		// Its check failed in a batch: its own script replies the error.
		return runScript(ctx, p.client, script, keys, args)
	}
	return vals, err
}

// leave takes c out of the queue, and reports whether it was there: a
// call still queued is not sent. The calls that leave are usually the
// oldest, at the queue's head.
func (p *pipeline) leave(c *call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.queue, c)
	switch {
	case i < 0:
		return false // taken by a pipeline
	case i == 0:
		p.queue[0] = nil
		p.queue = p.queue[1:]
	default:
		p.queue = slices.Delete(p.queue, i, i+1)
	}
	if len(p.queue) == 0 {
		p.queue = p.queue[:0:0] // let the backing array go
	}
	return true
}

// runAlone runs script with keys and args as run does when a round trip
// is free for it, and reports whether it did: sent false, when every
// round trip is in flight, means nothing was sent.
func (p *pipeline) runAlone(ctx context.Context, script *redis.Script, keys []string, args []any) (vals []int64, sent bool, err error) {
	p.mu.Lock()
	if p.inflight >= p.max {
		p.mu.Unlock()
		return nil, false, nil
	}
	vals, err = p.runLocked(ctx, script, keys, args)
	return vals, true, err
}

// runLocked, called with p.mu held and a round trip free, takes that
// round trip, unlocks, runs script and hands the round trip on.
func (p *pipeline) runLocked(ctx context.Context, script *redis.Script, keys []string, args []any) ([]int64, error) {
	p.inflight++
	p.mu.Unlock()
	vals, err := runScript(ctx, p.client, script, keys, args)
	p.handOff()
	return vals, err
}

// handOff ends a round trip: it frees its place, or gives it to a
// goroutine that sends the queue.
func (p *pipeline) handOff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		p.inflight--
		return
	}
	go p.flush()
}

// flush sends the queued calls, maxBatch at a time, until none is left,
// then frees its place.
func (p *pipeline) flush() {
	var batch []*call
	for {
		p.mu.Lock()
		n := min(len(p.queue), maxBatch)
		if n == 0 {
			p.inflight--
			p.mu.Unlock()
			return
		}
		batch = append(batch[:0], p.queue[:n]...)
		clear(p.queue[:n])
		p.queue = p.queue[n:]
		if len(p.queue) == 0 {
			p.queue = p.queue[:0:0] // let the backing array go
		}
		p.mu.Unlock()
		p.send(batch)
	}
}

// send writes batch as one pipeline, the one-check calls of each algorithm
// decided by batch scripts (see units), and answers each call.
func (p *pipeline) send(batch []*call) {
	live := batch[:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			c.done <- struct{}{}
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := batchContext(live)
	defer cancel()
	if len(live) == 1 {
		c := live[0]
		c.vals, c.err = runScript(ctx, p.client, c.script, c.keys, c.args)
		c.done <- struct{}{}
		return
	}
	us := units(live)
	pipe := p.client.Batch()
	for i := range us {
		u := &us[i]
		u.cmd = evalCmd(ctx, u.script, false, u.keys, u.args)
		_ = pipe.Process(ctx, u.cmd)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	// After SCRIPT FLUSH or a restart: send the scripts themselves, which
	// loads them, in a second pipeline.
	var retry batching.Batch
	for i := range us {
		u := &us[i]
		if noScript(u.cmd.Err()) {
			if retry == nil {
				retry = p.client.Batch()
			}
			u.cmd = evalCmd(ctx, u.script, true, u.keys, u.args)
			_ = retry.Process(ctx, u.cmd)
		}
	}
	if retry != nil {
		_, _ = retry.Exec(ctx)
	}
	for i := range us {
		us[i].answer()
	}
}

// batchContext is the context a pipeline of calls, all live, is sent
// with: none of their values (the pipeline is none of theirs; a caller's
// trace or tenant does not describe the others), no cancellation (a
// caller that gives up stops waiting, not the others), and the earliest
// of their deadlines, so that the round trip, and the connection and the
// place among Config.Pipelines it holds, end no later than the first of
// its callers stops waiting; none if no call has one.
func batchContext(calls []*call) (context.Context, context.CancelFunc) {
	var first time.Time
	for _, c := range calls {
		if d, ok := c.ctx.Deadline(); ok && (first.IsZero() || d.Before(first)) {
			first = d
		}
	}
	if first.IsZero() {
		return context.Background(), func() {}
	}
	return context.WithDeadline(context.Background(), first)
}
