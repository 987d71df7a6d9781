package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/calc"
	"github.com/redlimit/redlimit/algorithms/redisstore/internal/batching"
)

// stalled is a batching.Batcher whose round trips wait until release is closed,
// as on a Redis that stopped answering, then answer every script as a
// GCRA check allowed. It records the scripts it was given and the context
// of each round trip.
type stalled struct {
	redis.Scripter // unused: the store sends through Process and Batch
	release        chan struct{}
	started        chan struct{} // receives as each round trip starts

	sent atomic.Int64
	mu   sync.Mutex
	ctxs []context.Context
	keys map[string]bool // the keys of every script sent
}

func newStalled() *stalled {
	return &stalled{release: make(chan struct{}), started: make(chan struct{}, 1024), keys: map[string]bool{}}
}

func (s *stalled) trip(ctx context.Context, cmds ...redis.Cmder) {
	s.sent.Add(int64(len(cmds)))
	s.mu.Lock()
	s.ctxs = append(s.ctxs, ctx)
	for _, cmd := range cmds {
		args := cmd.Args() // evalsha sha numkeys keys... args...
		n := args[2].(int)
		for _, k := range args[3 : 3+n] {
			s.keys[k.(string)] = true
		}
	}
	s.mu.Unlock()
	s.started <- struct{}{}
	<-s.release
	for _, cmd := range cmds {
		cmd.(*redis.IntSliceCmd).SetVal(make([]int64, 4)) // a reply, not always the right length
	}
}

func (s *stalled) Process(ctx context.Context, cmd redis.Cmder) error {
	s.trip(ctx, cmd)
	return nil
}

func (s *stalled) Batch() batching.Batch { return &stalledBatch{s: s} }

type stalledBatch struct {
	s    *stalled
	cmds []redis.Cmder
}

func (b *stalledBatch) Process(_ context.Context, cmd redis.Cmder) error {
	b.cmds = append(b.cmds, cmd)
	return nil
}

func (b *stalledBatch) Exec(ctx context.Context) ([]redis.Cmder, error) {
	b.s.trip(ctx, b.cmds...)
	return b.cmds, nil
}

// gcraCall is the script, KEYS and ARGV of one GCRA check on key.
func gcraCall(key string) (*redis.Script, []string, []any) {
	p := calc.Prepare(uint8(algorithms.GCRA), 1000, time.Hour, 0, 1)
	return oneScripts[algorithms.GCRA], []string{key}, oneArgs(&p, 0)
}

// TestPipelineQueueBounded: behind a round trip that does not come back,
// at most maxQueued calls queue; the next fails at once, as a
// BackendError through the store. Queued calls whose context ends leave
// the queue: once the round trip is back, none of them is sent, and the
// queue holds nothing.
func TestPipelineQueueBounded(t *testing.T) {
	s := newStalled()
	b, err := New(s, Config{Pipelines: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := b.pipe
	first := make(chan error, 1)
	go func() {
		_, err := p.run(context.Background(), oneScripts[algorithms.GCRA], []string{"first"}, []any{int64(0)})
		first <- err
	}()
	<-s.started
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var gaveUp atomic.Int64
	for range maxQueued {
		wg.Go(func() {
			script, keys, args := gcraCall("queued")
			if _, err := p.run(ctx, script, keys, args); errors.Is(err, context.Canceled) {
				gaveUp.Add(1)
			}
		})
	}
	queued := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.queue)
	}
	for deadline := time.Now().Add(time.Minute); queued() < maxQueued; {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want %d", queued(), maxQueued)
		}
		time.Sleep(time.Millisecond)
	}
	// one more: at once, an error for the engine's policy
	res := make([]algorithms.Result, 1)
	oneMore, cancelOneMore := context.WithTimeout(context.Background(), 10*time.Second) // a queue without bound would wait this long
	defer cancelOneMore()
	err = b.Allow(oneMore, []algorithms.Check{{Key: "one-more", Algorithm: algorithms.GCRA, Limit: algorithms.PerHour(1000)}}, res)
	var be *algorithms.BackendError
	if !errors.As(err, &be) || !errors.Is(err, errQueueFull) {
		t.Fatalf("Allow with %d calls queued = %v, want a BackendError for a full queue", maxQueued, err)
	}
	if got := queued(); got != maxQueued {
		t.Fatalf("%d calls queued after one refused, want %d", got, maxQueued)
	}
	cancel()
	wg.Wait()
	if got := queued(); got != 0 || gaveUp.Load() != maxQueued {
		t.Fatalf("after every queued caller gave up: %d calls still queued, %d returned their context's error; want 0 and %d", got, gaveUp.Load(), maxQueued)
	}
	close(s.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// the round trip handed off: nothing left to send
	p.mu.Lock()
	inflight := p.inflight
	p.mu.Unlock()
	if inflight != 0 || s.sent.Load() != 1 {
		t.Fatalf("after the round trip: %d in flight, %d scripts sent; want 0 and 1 (no caller that gave up is sent)", inflight, s.sent.Load())
	}
}

type valueKey struct{}

// TestBatchContext: a pipeline of queued calls is sent with none of its
// callers' context values, and with the earliest deadline of the callers
// still waiting: not that of a caller that gave up, not a later one.
func TestBatchContext(t *testing.T) {
	s := newStalled()
	b, err := New(s, Config{Pipelines: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := b.pipe
	go p.run(context.Background(), oneScripts[algorithms.GCRA], []string{"first"}, []any{int64(0)})
	<-s.started
	now := time.Now()
	late, cancelLate := context.WithDeadline(context.WithValue(context.Background(), valueKey{}, "late"), now.Add(time.Hour))
	defer cancelLate()
	early, cancelEarly := context.WithDeadline(context.WithValue(context.Background(), valueKey{}, "early"), now.Add(30*time.Minute))
	defer cancelEarly()
	gone, cancelGone := context.WithDeadline(context.Background(), now.Add(time.Minute))
	var wg sync.WaitGroup
	for i, ctx := range []context.Context{late, gone, early} {
		wg.Go(func() {
			script, keys, args := gcraCall("k" + string(rune('a'+i)))
			p.run(ctx, script, keys, args)
		})
		// in this order: the first queued is the latest deadline
		for deadline := time.Now().Add(time.Minute); ; {
			p.mu.Lock()
			n := len(p.queue)
			p.mu.Unlock()
			if n == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d calls queued, want %d", n, i+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	cancelGone() // gives up: leaves the queue
	close(s.release)
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ctxs) != 2 {
		t.Fatalf("%d round trips, want 2 (the first, then the queue's)", len(s.ctxs))
	}
	ctx := s.ctxs[1]
	if v := ctx.Value(valueKey{}); v != nil {
		t.Errorf("the pipeline carries a caller's value %v", v)
	}
	if d, ok := ctx.Deadline(); !ok || !d.Equal(now.Add(30*time.Minute)) {
		t.Errorf("the pipeline's deadline is %v (%v), want the earliest of its live callers', now+30m", d.Sub(now), ok)
	}
	for key, want := range map[string]bool{"ka": true, "kb": false, "kc": true} {
		if s.keys[key] != want {
			t.Errorf("key %s sent: %v, want %v (kb's caller gave up)", key, s.keys[key], want)
		}
	}
}

// TestDetachBounded: at most maxDetached refunds and cancels run in the
// background; one more is not started, is counted and is reported to
// OnRefundError as a BackendError.
func TestDetachBounded(t *testing.T) {
	var reported []error
	b := &Store{onRefundError: func(err error) { reported = append(reported, err) }}
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(maxDetached)
	for range maxDetached {
		b.detach(func() { started.Done(); <-release })
	}
	started.Wait()
	b.detach(func() { t.Error("a refund past the bound started") })
	var be *algorithms.BackendError
	if b.dropped.Load() != 1 || len(reported) != 1 || !errors.As(reported[0], &be) || !errors.Is(reported[0], errDetached) {
		t.Fatalf("past the bound: %d dropped, reported %v; want 1 dropped, reported as a BackendError", b.dropped.Load(), reported)
	}
	close(release)
	for deadline := time.Now().Add(time.Minute); b.settling.Load() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d refunds still running", b.settling.Load())
		}
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	b.detach(func() { close(done) })
	<-done
}
