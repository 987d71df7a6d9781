package main

import (
	"context"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// start is when the simulated clock starts: a whole second of Unix time, so
// the epoch-aligned windows of fixed_window and sliding_window begin at every
// whole second of the plot.
var start = time.Unix(1_700_000_000, 0)

// A lane is one algorithm's decisions on the traffic: allowed[i] is the
// decision on the request at offset at[i].
type lane struct {
	alg     algorithms.Algorithm
	at      []time.Duration
	allowed []bool
}

// simulateAll plays reqs against every algorithm under l.
func simulateAll(l algorithms.Limit, reqs []time.Duration) ([]lane, error) {
	lanes := make([]lane, 0, len(algorithms.Algorithms))
	for _, alg := range algorithms.Algorithms {
		allowed, err := simulate(alg, l, reqs)
		if err != nil {
			return nil, err
		}
		lanes = append(lanes, lane{alg: alg, at: reqs, allowed: allowed})
	}
	return lanes, nil
}

// simulate sends one request of cost 1 at each offset in reqs (sorted) to a
// fresh in-memory backend whose clock reads start+offset, and returns the
// decisions.
func simulate(alg algorithms.Algorithm, l algorithms.Limit, reqs []time.Duration) ([]bool, error) {
	var now time.Time
	m, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		return nil, err
	}
	checks := []algorithms.Check{{Key: "client", Algorithm: alg, Limit: l, Cost: 1}}
	results := make([]algorithms.Result, 1)
	allowed := make([]bool, len(reqs))
	for i, at := range reqs {
		now = start.Add(at)
		if err := m.Allow(context.Background(), checks, results); err != nil {
			return nil, err
		}
		allowed[i] = results[0].Allowed
	}
	return allowed, nil
}

// laneStats are the numbers printed on a lane.
type laneStats struct {
	allowed, denied int
	maxPerPeriod    int // the most allowed in any interval [t, t+period)
}

func (ln lane) stats(period time.Duration) laneStats {
	var s laneStats
	var times []time.Duration
	for i, ok := range ln.allowed {
		if ok {
			s.allowed++
			times = append(times, ln.at[i])
		} else {
			s.denied++
		}
	}
	s.maxPerPeriod = maxInWindow(times, period)
	return s
}

// maxInWindow returns the largest number of times (sorted) that fit in one
// half-open interval of length period. Such an interval can always be slid
// right until it starts at one of the times, so it is enough to count, for
// each time, how many follow it by less than period.
func maxInWindow(times []time.Duration, period time.Duration) int {
	best, j := 0, 0
	for i, t := range times {
		for j < len(times) && times[j] < t+period {
			j++
		}
		best = max(best, j-i)
	}
	return best
}
