package main

import (
	"slices"
	"time"
)

// The traffic, as offsets from the start of the simulation.
const (
	span         = 4 * time.Second        // how long the traffic lasts
	steadyEvery  = 125 * time.Millisecond // the steady client: 8 per second
	boundary     = 2 * time.Second        // the window boundary the burst straddles
	burstHalf    = 10                     // requests on each side of the boundary
	burstSpacing = 5 * time.Millisecond   // 10 requests fit in 50 ms
)

// traffic returns the arrival times of every request, sorted: a steady
// request in the middle of each 125 ms slot (so none coincides with the
// burst), plus burstHalf requests in the 50 ms before boundary and burstHalf
// in the 50 ms from it.
func traffic() []time.Duration {
	var reqs []time.Duration
	for t := steadyEvery / 2; t < span; t += steadyEvery {
		reqs = append(reqs, t)
	}
	for i := range burstHalf {
		reqs = append(reqs, boundary-time.Duration(burstHalf-i)*burstSpacing)
		reqs = append(reqs, boundary+time.Duration(i)*burstSpacing)
	}
	slices.Sort(reqs)
	return reqs
}
