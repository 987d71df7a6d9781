package headers

import (
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
)

// allow is an allowed Result.
func allow(limit, remaining int64, resetAfter time.Duration) algorithms.Result {
	return algorithms.Result{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: resetAfter}
}

// deny is a denied Result; retryAfter 0 makes it a Never denial.
func deny(limit, remaining int64, retryAfter, resetAfter time.Duration) algorithms.Result {
	return algorithms.Result{Limit: limit, Remaining: remaining, RetryAfter: retryAfter, ResetAfter: resetAfter}
}

// pols builds unnamed policies from results.
func pols(results ...algorithms.Result) []Policy {
	ps := make([]Policy, len(results))
	for i, r := range results {
		ps[i] = Policy{Name: "p" + string(rune('0'+i)), Window: time.Minute, Result: r}
	}
	return ps
}

func TestDecisive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		policies []Policy
		want     int
	}{
		{"empty", nil, -1},
		{"one allowed", pols(allow(10, 9, time.Second)), 0},
		{"one denied", pols(deny(10, 0, time.Second, time.Second)), 0},
		{"allowed: least remaining", pols(allow(100, 50, time.Second), allow(10, 3, time.Second), allow(1000, 900, time.Hour)), 1},
		{"allowed: remaining tie, longest reset", pols(allow(10, 3, time.Second), allow(10, 3, time.Minute), allow(10, 3, time.Second)), 1},
		{"allowed: full tie, first", pols(allow(10, 3, time.Second), allow(20, 3, time.Second)), 0},
		{"allowed: remaining beats reset", pols(allow(10, 2, time.Second), allow(10, 3, time.Hour)), 0},
		{"denied: only denied counts", pols(allow(10, 0, time.Hour), deny(100, 5, time.Second, time.Second)), 1},
		{"denied: longest wait", pols(deny(10, 0, time.Second, time.Hour), deny(10, 0, time.Minute, time.Minute), deny(10, 0, 2*time.Second, time.Hour)), 1},
		{"denied: wait tie, first", pols(allow(10, 9, 0), deny(10, 0, time.Second, time.Second), deny(10, 0, time.Second, time.Hour)), 1},
		{"denied: never is longest", pols(deny(10, 0, time.Hour, time.Hour), deny(5, 5, 0, 0), deny(10, 0, 2*time.Hour, time.Hour)), 1},
		{"denied: never tie, first", pols(deny(5, 5, 0, 0), deny(3, 3, 0, 0)), 0},
		{"denied: finite after never", pols(deny(5, 5, 0, 0), deny(10, 0, time.Hour, time.Hour)), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Decisive(tt.policies); got != tt.want {
				t.Errorf("Decisive(%+v) = %d, want %d", tt.policies, got, tt.want)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		policies []Policy
		want     int64
		wantOK   bool
	}{
		{"empty", nil, 0, false},
		{"allowed", pols(allow(10, 0, time.Minute)), 0, false},
		{"1ns rounds up to 1", pols(deny(10, 0, time.Nanosecond, time.Second)), 1, true},
		{"1µs rounds up to 1", pols(deny(10, 0, time.Microsecond, time.Second)), 1, true},
		{"exact second", pols(deny(10, 0, 2*time.Second, time.Minute)), 2, true},
		{"1500ms rounds up", pols(deny(10, 0, 1500*time.Millisecond, time.Minute)), 2, true},
		{"never", pols(deny(5, 5, 0, 0)), 0, false},
		{"all never", pols(deny(5, 5, 0, 0), deny(3, 3, 0, 0)), 0, false},
		{"never and finite: none, the request can never pass", pols(deny(5, 5, 0, 0), deny(10, 0, 3*time.Second, time.Minute)), 0, false},
		{"longest among denied", pols(deny(10, 0, time.Second, time.Minute), deny(10, 0, 41*time.Second+time.Millisecond, time.Minute), deny(10, 0, 7*time.Second, time.Minute)), 42, true},
		{"allowed ignored", pols(allow(10, 0, time.Hour), deny(10, 0, time.Second, time.Minute)), 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := RetryAfter(tt.policies)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("RetryAfter(%+v) = %d, %t, want %d, %t", tt.policies, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestCeilSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Nanosecond, 1},
		{999 * time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + time.Nanosecond, 2},
		{1500 * time.Millisecond, 2},
		{time.Hour, 3600},
		{1<<63 - 1, 9223372037},
	}
	for _, tt := range tests {
		if got := ceilSeconds(tt.d); got != tt.want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestCeilUnix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		t    time.Time
		want int64
	}{
		{time.Unix(1_700_000_000, 0), 1_700_000_000},
		{time.Unix(1_700_000_000, 1), 1_700_000_001},
		{time.Unix(1_700_000_000, 999_999_999), 1_700_000_001},
		{time.Unix(-2, 500_000_000), -1}, // -1.5 rounds up to -1
		{time.Unix(0, 0), 0},
	}
	for _, tt := range tests {
		if got := ceilUnix(tt.t); got != tt.want {
			t.Errorf("ceilUnix(%v) = %d, want %d", tt.t, got, tt.want)
		}
	}
}
