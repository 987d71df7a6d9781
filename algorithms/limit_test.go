package algorithms_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/internal/contract"
)

func TestLimitValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		alg   algorithms.Algorithm
		limit algorithms.Limit
		want  string // substring of the error; "" means valid
	}{
		{"valid token bucket", algorithms.TokenBucket, algorithms.PerSecond(10).WithBurst(20), ""},
		{"valid fixed window", algorithms.FixedWindow, algorithms.PerMinute(100), ""},
		{"valid gcra odd rate", algorithms.GCRA, algorithms.Limit{Rate: 7, Period: time.Second}, ""},
		{"zero rate", algorithms.GCRA, algorithms.Limit{Period: time.Second}, "Limit.Rate must be > 0, got 0"},
		{"negative rate", algorithms.FixedWindow, algorithms.Limit{Rate: -1, Period: time.Second}, "Limit.Rate must be > 0, got -1"},
		{"zero period", algorithms.SlidingLog, algorithms.Limit{Rate: 1}, "Limit.Period must be >= 1µs, got 0s"},
		{"negative period", algorithms.TokenBucket, algorithms.Limit{Rate: 1, Period: -time.Second}, "Limit.Period must be >= 1µs"},
		{"sub-microsecond period", algorithms.TokenBucket, algorithms.Limit{Rate: 1, Period: 1500 * time.Nanosecond}, "whole number of microseconds"},
		{"period over a year", algorithms.FixedWindow, algorithms.Limit{Rate: 1, Period: 400 * 24 * time.Hour}, "Limit.Period must be <= 366 days"},
		{"negative burst", algorithms.TokenBucket, algorithms.PerSecond(1).WithBurst(-1), "Limit.Burst must be >= 0, got -1"},
		{"burst on fixed window", algorithms.FixedWindow, algorithms.PerSecond(1).WithBurst(5), "Limit.Burst is not used by fixed_window"},
		{"burst on sliding log", algorithms.SlidingLog, algorithms.PerSecond(1).WithBurst(5), "Limit.Burst is not used by sliding_log"},
		{"burst on sliding window", algorithms.SlidingWindow, algorithms.PerSecond(1).WithBurst(5), "Limit.Burst is not used by sliding_window"},
		{"largest sliding log", algorithms.SlidingLog, algorithms.PerHour(2_000), ""},
		// Issue 10, item 8: a check of cost 1,000,000 held Redis for 2.49s.
		{"huge sliding log", algorithms.SlidingLog, algorithms.PerSecond(1_000_000), "Limit.Rate must be <= 2000 for sliding_log"},
		{"sliding log above the bound", algorithms.SlidingLog, algorithms.PerMinute(2_001), "Limit.Rate must be <= 2000 for sliding_log (one sorted-set member per unit"},
		{"huge rate", algorithms.FixedWindow, algorithms.PerSecond(1 << 41), "Limit.Rate must be <= 2^40"},
		{"inexact bucket", algorithms.TokenBucket, algorithms.Limit{Rate: 1, Period: 300 * 24 * time.Hour, Burst: 1 << 30}, "Limit.Burst"},
		{"unknown algorithm", algorithms.Algorithm(9), algorithms.PerSecond(1), "Algorithm must be one of"},
		{"zero algorithm", 0, algorithms.PerSecond(1), "Algorithm must be one of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.limit.Validate(tt.alg)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate(%v, %v) = %v, want nil", tt.limit, tt.alg, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate(%v, %v) = %v, want error containing %q", tt.limit, tt.alg, err, tt.want)
			}
			if !errors.Is(err, algorithms.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "redlimit: ") {
				t.Fatalf("error %q: want redlimit: prefix and errors.Is ErrInvalidConfig", err)
			}
		})
	}
}

func TestConfigErrorNamesRule(t *testing.T) {
	t.Parallel()
	err := contract.WithRule(algorithms.PerSecond(1).WithBurst(-1).Validate(algorithms.TokenBucket), "login")
	want := `redlimit: rule "login": Limit.Burst must be >= 0, got -1`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// TestAllowRejectsInvalidChecks: an invalid check is an error before
// anything is stored, never a panic and never a silent allow, on every
// backend.
func TestAllowRejectsInvalidChecks(t *testing.T) {
	ok := algorithms.Check{Key: "k1", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1)}
	tests := []struct {
		name    string
		checks  []algorithms.Check
		results int
		want    string
	}{
		{"no checks", nil, 1, "checks must not be empty"},
		{"short results", []algorithms.Check{ok, {Key: "k2", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1)}}, 1, "results must hold one Result per Check"},
		{"empty key", []algorithms.Check{{Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1)}}, 1, "Check.Key must not be empty"},
		{"duplicate key", []algorithms.Check{ok, ok}, 2, "appears twice"},
		{"negative cost", []algorithms.Check{{Key: "k", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1), Cost: -1}}, 1, "Cost must be >= 0, got -1"},
		{"bad limit", []algorithms.Check{ok, {Key: "k2", Algorithm: algorithms.FixedWindow, Limit: algorithms.Limit{Rate: 5}}}, 2, "Limit.Period"},
		{"no algorithm", []algorithms.Check{{Key: "k", Limit: algorithms.PerSecond(1)}}, 1, "Algorithm must be one of"},
	}
	for _, kind := range backendKinds() {
		t.Run(kind.name, func(t *testing.T) {
			h := kind.new(t)
			for _, tt := range tests {
				checks := make([]algorithms.Check, len(tt.checks))
				for i, c := range tt.checks {
					if c.Key != "" {
						c.Key = h.Prefix + c.Key
					}
					checks[i] = c
				}
				err := h.Backend.Allow(context.Background(), checks, make([]algorithms.Result, tt.results))
				if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, algorithms.ErrInvalidConfig) {
					t.Errorf("%s: Allow = %v, want ErrInvalidConfig containing %q", tt.name, err, tt.want)
				}
			}
			// Nothing was stored: the valid check in the rejected calls is
			// still at full capacity.
			res := make([]algorithms.Result, 1)
			if err := h.Backend.Allow(context.Background(), []algorithms.Check{{Key: h.Prefix + "k1", Algorithm: algorithms.GCRA, Limit: algorithms.PerSecond(1)}}, res); err != nil || !res[0].Allowed {
				t.Fatalf("after rejected calls: %+v, %v; want allowed (nothing consumed)", res[0], err)
			}
		})
	}
}

func TestParseAlgorithm(t *testing.T) {
	t.Parallel()
	for _, a := range algorithms.Algorithms {
		got, err := algorithms.ParseAlgorithm(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q) = %v, %v", a.String(), got, err)
		}
		b, _ := a.MarshalText()
		var back algorithms.Algorithm
		if err := back.UnmarshalText(b); err != nil || back != a {
			t.Errorf("text round trip of %v = %v, %v", a, back, err)
		}
	}
	if _, err := algorithms.ParseAlgorithm("leaky"); err == nil || !errors.Is(err, algorithms.ErrInvalidConfig) {
		t.Errorf("ParseAlgorithm(leaky) = %v, want ErrInvalidConfig", err)
	}
}

func TestLimitCapacity(t *testing.T) {
	t.Parallel()
	l := algorithms.PerMinute(100).WithBurst(20)
	for _, tt := range []struct {
		alg  algorithms.Algorithm
		want int64
	}{{algorithms.TokenBucket, 20}, {algorithms.GCRA, 20}, {algorithms.FixedWindow, 100}} {
		if got := l.Capacity(tt.alg); got != tt.want {
			t.Errorf("Capacity(%v) = %d, want %d", tt.alg, got, tt.want)
		}
	}
	if got := algorithms.PerMinute(100).Capacity(algorithms.GCRA); got != 100 {
		t.Errorf("Capacity without burst = %d, want Rate", got)
	}
}

// TestBucketReduction: the bucket algorithms work in Rate and Period reduced
// by their gcd; odd combinations must still refill exactly Rate per Period.
func TestBucketReduction(t *testing.T) {
	t.Parallel()
	for _, l := range []algorithms.Limit{
		{Rate: 7, Period: time.Second},
		{Rate: 1 << 30, Period: time.Hour},
		{Rate: 999_983, Period: time.Second},
		{Rate: 360, Period: time.Hour, Burst: 1},
		{Rate: 6, Period: 4 * time.Microsecond, Burst: 3},
	} {
		for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.GCRA} {
			b, c := newMemory(t)
			capacity := l.Capacity(alg)
			check := []algorithms.Check{{Key: "k", Algorithm: alg, Limit: l, Cost: capacity}}
			res := make([]algorithms.Result, 1)
			if err := b.Allow(context.Background(), check, res); err != nil || !res[0].Allowed {
				t.Fatalf("%v %v: first full burst: %+v %v", alg, l, res[0], err)
			}
			// After exactly capacity×Period/Rate the bucket is full again.
			full := time.Duration(int64(l.Period) / l.Rate * capacity)
			if res[0].ResetAfter < full || res[0].ResetAfter > full+time.Microsecond*time.Duration(capacity) {
				t.Errorf("%v %v: ResetAfter %v, want about %v", alg, l, res[0].ResetAfter, full)
			}
			c.T = c.T.Add(res[0].ResetAfter)
			if err := b.Allow(context.Background(), check, res); err != nil || !res[0].Allowed {
				t.Fatalf("%v %v: burst after ResetAfter: %+v %v", alg, l, res[0], err)
			}
		}
	}
}
