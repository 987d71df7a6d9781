package after

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder is the work of the tests: each job waits at gate, and the
// recorder counts how many run at once and how often each job ran.
type recorder struct {
	gate chan struct{}

	mu      sync.Mutex
	running int
	most    int
	done    map[int]int
}

func newRecorder() *recorder { return &recorder{gate: make(chan struct{}), done: map[int]int{}} }

func (r *recorder) do(j int) {
	r.mu.Lock()
	r.running++
	r.most = max(r.most, r.running)
	r.mu.Unlock()
	<-r.gate
	r.mu.Lock()
	r.running--
	r.done[j]++
	r.mu.Unlock()
}

// once fails t unless each of the jobs 0..n-1 ran exactly once.
func (r *recorder) once(t *testing.T, n int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.done) != n {
		t.Errorf("%d jobs done, want %d", len(r.done), n)
	}
	for j, c := range r.done {
		if c != 1 || j >= n {
			t.Errorf("job %d done %d times", j, c)
		}
	}
}

func (q *Queue[J]) workersRunning() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running
}

// TestQueueBounds: two workers and a queue of three take five jobs; the
// sixth is refused (the caller does it), and Full reports it once. At
// most two jobs run at once, each runs once, and the workers end after
// Idle without work.
func TestQueueBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		q := New(2, 3, r.do)
		for j := range 5 {
			if !q.Enqueue(j) {
				t.Fatalf("Enqueue(%d) refused, want queued", j)
			}
			synctest.Wait()
		}
		if q.Enqueue(5) {
			t.Fatal("Enqueue(5) queued in a full queue")
		}
		if p, w := q.Pending(), q.workersRunning(); p != 5 || w != 2 {
			t.Fatalf("%d pending, %d workers, want 5 and 2", p, w)
		}
		if n := q.Full(); n != 1 {
			t.Fatalf("Full() = %d, want 1", n)
		}
		close(r.gate)
		synctest.Wait()
		if p := q.Pending(); p != 0 {
			t.Fatalf("%d pending after the gate opened, want 0", p)
		}
		r.once(t, 5)
		if r.most != 2 {
			t.Fatalf("%d jobs ran at once, want 2", r.most)
		}
		time.Sleep(Idle - time.Nanosecond)
		synctest.Wait()
		if w := q.workersRunning(); w != 2 {
			t.Fatalf("%d workers just before Idle, want 2", w)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if w := q.workersRunning(); w != 0 {
			t.Fatalf("%d workers after Idle without work, want 0", w)
		}
		if !q.Enqueue(6) {
			t.Fatal("Enqueue(6) refused after the workers ended")
		}
		synctest.Wait()
		if w, p := q.workersRunning(), q.Pending(); w != 1 || p != 0 {
			t.Fatalf("%d workers, %d pending, want a new worker to have done it", w, p)
		}
		q.Close()
	})
}

// TestQueueWorkerPerJob: a worker is started only when no idle worker
// is left for the jobs waiting: jobs one after the other use one.
func TestQueueWorkerPerJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		close(r.gate)
		q := New(16, 8, r.do)
		for j := range 10 {
			q.Enqueue(j)
			synctest.Wait()
		}
		if w := q.workersRunning(); w != 1 {
			t.Fatalf("%d workers for jobs one after the other, want 1", w)
		}
		r.once(t, 10)
		q.Close()
	})
}

// TestQueueClose: Close returns once every queued job is done, refuses
// jobs from then on, and can be called again.
func TestQueueClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		q := New(1, 8, r.do)
		for j := range 5 {
			q.Enqueue(j)
		}
		closed := make(chan struct{})
		go func() {
			q.Close()
			close(closed)
		}()
		synctest.Wait()
		select {
		case <-closed:
			t.Fatal("Close returned with jobs queued")
		default:
		}
		if q.Enqueue(5) {
			t.Fatal("Enqueue queued after Close")
		}
		close(r.gate)
		<-closed
		r.once(t, 5)
		if p := q.Pending(); p != 0 {
			t.Fatalf("%d pending after Close, want 0", p)
		}
		if n := q.Full(); n != 0 {
			t.Fatalf("Full() = %d after a refusal by a closed queue, want 0", n)
		}
		q.Close()
	})
}

// TestQueueFull: Full reports the refusals of a full queue at most once
// a second, and those in between at the next report.
func TestQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder()
		q := New(1, 1, r.do)
		q.Enqueue(0)
		synctest.Wait() // the worker holds job 0
		q.Enqueue(1)    // queued
		for range 3 {
			q.Enqueue(2)
		}
		if n := q.Full(); n != 3 {
			t.Fatalf("Full() = %d, want 3", n)
		}
		q.Enqueue(2)
		if n := q.Full(); n != 0 {
			t.Fatalf("Full() = %d at once after a report, want 0", n)
		}
		time.Sleep(time.Second)
		if n := q.Full(); n != 1 {
			t.Fatalf("Full() = %d a second later, want 1", n)
		}
		close(r.gate)
		q.Close()
	})
}

// TestGuard: a panic becomes an error; an error or nil passes through.
func TestGuard(t *testing.T) {
	if err := Guard(func() error { panic("boom") }); err == nil || !strings.HasPrefix(err.Error(), "redlimit: ") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Guard(panic) = %v", err)
	}
	e := errors.New("e")
	if err := Guard(func() error { return e }); err != e {
		t.Fatalf("Guard(error) = %v", err)
	}
	if err := Guard(func() error { return nil }); err != nil {
		t.Fatalf("Guard(nil) = %v", err)
	}
}
