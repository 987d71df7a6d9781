package redisstore

import (
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// MarkerKeys returns the pending marker of key and a commit marker of a
// call's part whose first key is key.
func MarkerKeys(key string) []string {
	return []string{pendingKey(key), commitKey(key, newCommitID())}
}

// SetCalendarClock makes b compute calendar windows around clock instead
// of time.Now when the server's clock decides: tests skew it against the
// server's.
func SetCalendarClock(b *Store, clock func() time.Time) { b.calendarNow = clock }

// OnCancel makes b report each cancel of a part of a call spanning slots
// that it delivers (see cancelDetached): whether it gave units back.
func OnCancel(b *Store, fn func(gaveBack bool)) { b.onCancel = fn }

// Dropped returns how many refunds and cancels b did not start, the most
// it runs at once being in flight (see detach).
func Dropped(b *Store) int64 { return b.dropped.Load() }

// Settling returns how many refunds and cancels b runs in the background.
func Settling(b *Store) int64 { return b.settling.Load() }

// Limits of the background work and of the pipeline queue.
const (
	MaxDetached = maxDetached
	MaxQueued   = maxQueued
)

// AllowQueued decides calls on b queued behind its pipeline with every
// round trip in flight, so that one pipeline sends them together (batch
// scripts deciding those it batches), and returns each call's Results and
// error, and the order in which the pipeline decided them.
func AllowQueued(t *testing.T, b *Store, calls [][]algorithms.Check) ([][]algorithms.Result, []error, []int) {
	t.Helper()
	q := make([]queued, len(calls))
	for i, c := range calls {
		q[i] = queued{checks: c}
	}
	results, errs := allowQueued(t, b, nil, q)
	return results, errs, executionOrder(q)
}

// Scripts returns every script b's package runs, for SCRIPT LOAD ahead of
// a test that counts scripts (no NOSCRIPT in its counts).
func Scripts() []string { return allScripts() }
