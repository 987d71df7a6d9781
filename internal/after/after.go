// Package after runs the work an adapter owes once a request's handler
// has returned (the release of the slots of its concurrency rules, the
// settling of its ResponseCost rules) on a bounded set of workers, off
// the response's path: the adapter queues the work and returns, and the
// server sends the response while a worker makes the backend calls.
//
// The HTTP middleware and the gRPC interceptors (the nested module
// middleware/grpclimit, whose import path lies under this module's) share
// it. A nested module of a release may be built against a later release
// of this module (a consumer's go.mod requires both, and Go picks the
// newer root), so what grpclimit uses here changes only together with a
// release of both, and only by growing.
//
// Bounds: at most [Workers] workers a queue, started when work arrives
// and gone after [Idle] without any; at most [Size] jobs waiting. A job
// waits for about Size/Workers (64) jobs ahead of it. When the queue is
// full, or closed, [Queue.Enqueue] refuses the job and the caller does it
// itself, as without a queue: nothing is dropped.
package after

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// Workers bounds the goroutines of a queue.
	Workers = 16
	// Size bounds the jobs waiting for a worker.
	Size = 1024
	// Idle is how long a worker waits for a job before it ends.
	Idle = time.Second
)

// Queue is a bounded queue of jobs of type J and the workers that do
// them, each with the func given to [New]. It is safe for concurrent use.
type Queue[J any] struct {
	do      func(J)
	jobs    chan J
	workers int // at most this many
	quit    chan struct{}
	wg      sync.WaitGroup // the workers

	mu      sync.Mutex
	running int // workers
	closed  bool

	idle    atomic.Int64 // workers waiting for a job
	pending atomic.Int64 // jobs queued or being done by a worker
	full    atomic.Int64 // jobs refused because the queue was full, not reported yet
	logged  atomic.Int64 // when Full last reported (UnixNano)
}

// New returns a queue of at most size jobs done by at most workers
// goroutines, each job by do. do must not panic: a worker's panic ends
// the process (see [Guard]).
func New[J any](workers, size int, do func(J)) *Queue[J] {
	return &Queue[J]{do: do, jobs: make(chan J, size), workers: workers, quit: make(chan struct{})}
}

// Enqueue queues j for a worker, starting one when no idle worker is
// left for the jobs waiting. It returns false, queuing nothing, when the
// queue is full or closed: the caller then does j itself.
func (q *Queue[J]) Enqueue(j J) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	q.pending.Add(1)
	select {
	case q.jobs <- j:
	default:
		q.pending.Add(-1)
		q.full.Add(1)
		return false
	}
	if q.running < q.workers && q.idle.Load() < int64(len(q.jobs)) {
		q.running++
		q.wg.Add(1)
		go q.work()
	}
	return true
}

// work does the queued jobs until none comes for Idle, or until Close,
// when it does those left.
func (q *Queue[J]) work() {
	defer q.wg.Done()
	t := time.NewTimer(Idle)
	defer t.Stop()
	for {
		q.idle.Add(1)
		select {
		case j := <-q.jobs:
			q.idle.Add(-1)
			q.do(j)
			q.pending.Add(-1)
			t.Reset(Idle)
		case <-t.C:
			q.mu.Lock()
			q.idle.Add(-1)
			if len(q.jobs) == 0 {
				q.running--
				q.mu.Unlock()
				return
			}
			q.mu.Unlock()
			t.Reset(Idle)
		case <-q.quit:
			q.idle.Add(-1)
			for {
				select {
				case j := <-q.jobs:
					q.do(j)
					q.pending.Add(-1)
				default:
					// closed: nothing is queued any more
					q.mu.Lock()
					q.running--
					q.mu.Unlock()
					return
				}
			}
		}
	}
}

// Close stops queuing (Enqueue returns false from then on) and returns
// once every queued job is done. It may be called more than once.
func (q *Queue[J]) Close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.quit)
	}
	q.mu.Unlock()
	q.wg.Wait()
}

// Pending returns how many jobs are queued or being done by a worker.
func (q *Queue[J]) Pending() int64 { return q.pending.Load() }

// Size returns how many jobs can wait for a worker.
func (q *Queue[J]) Size() int { return cap(q.jobs) }

// Full returns how many jobs Enqueue refused because the queue was full
// since it last returned more than 0, at most once a second (0 in
// between, and when none was refused): what a caller logs after a
// refusal, without a line per job.
func (q *Queue[J]) Full() int64 {
	if q.full.Load() == 0 {
		return 0 // closed, not full
	}
	now := time.Now().UnixNano()
	last := q.logged.Load()
	if now-last < int64(time.Second) || !q.logged.CompareAndSwap(last, now) {
		return 0
	}
	return q.full.Swap(0)
}

// Guard runs f, turning a panic into an error: a worker's panic would
// end the process, where on the request's goroutine the server may
// recover it.
func Guard(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("redlimit: panic after the response: %v", v)
		}
	}()
	return f()
}
