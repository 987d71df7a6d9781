package algorithms_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/backendtest"
	"github.com/redlimit/redlimit/internal/redistest"
)

func TestCalendarValidate(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		limit algorithms.Limit
		alg   algorithms.Algorithm
		want  string // "" for valid
	}{
		{algorithms.PerDayIn(10000, berlin), algorithms.FixedWindow, ""},
		{algorithms.PerWeekIn(1, nil), algorithms.FixedWindow, ""},
		{algorithms.PerMonthIn(1<<40, time.UTC), algorithms.FixedWindow, ""},
		{algorithms.PerYearIn(5, berlin), algorithms.FixedWindow, ""},
		{algorithms.PerDayIn(10, berlin), algorithms.GCRA, "redlimit: Limit.Calendar is a fixed window of calendar periods and needs Algorithm fixed_window, got gcra"},
		{algorithms.PerDayIn(10, berlin), algorithms.SlidingWindow, "redlimit: Limit.Calendar is a fixed window of calendar periods and needs Algorithm fixed_window, got sliding_window"},
		{algorithms.Limit{Rate: 10, Period: time.Hour, Calendar: algorithms.Day}, algorithms.FixedWindow, "redlimit: Limit.Period must be 0 when Limit.Calendar is set (the calendar sets the windows), got 1h0m0s"},
		{algorithms.PerDayIn(0, nil), algorithms.FixedWindow, "redlimit: Limit.Rate must be > 0, got 0"},
		{algorithms.PerMonthIn(1<<40+1, nil), algorithms.FixedWindow, "redlimit: Limit.Rate must be <= 2^40, got 1099511627777"},
		{algorithms.PerDayIn(10, nil).WithBurst(5), algorithms.FixedWindow, "redlimit: Limit.Burst is not used by a calendar quota and must be 0, got 5"},
		{algorithms.Limit{Rate: 10, Calendar: 9}, algorithms.FixedWindow, "redlimit: Limit.Calendar must be Day, Week, Month or Year, got 9"},
		{algorithms.Limit{Rate: 10, Period: time.Hour, Location: berlin}, algorithms.FixedWindow, "redlimit: Limit.Location is used only by a calendar quota and must be nil when Limit.Calendar is not set, got Europe/Berlin"},
		{algorithms.PerDayIn(10, berlin), 0, "redlimit: Algorithm must be one of fixed_window, sliding_log, sliding_window, token_bucket, gcra, concurrency, got Algorithm(0)"},
	}
	for _, tt := range tests {
		err := tt.limit.Validate(tt.alg)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%v.Validate(%v) = %v, want nil", tt.limit, tt.alg, err)
			}
			continue
		}
		var ce *algorithms.ConfigError
		if err == nil || err.Error() != tt.want || !errors.As(err, &ce) {
			t.Errorf("%v.Validate(%v) = %v, want *ConfigError %q", tt.limit, tt.alg, err, tt.want)
		}
	}
}

func TestCalendarString(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for l, want := range map[algorithms.Limit]string{
		algorithms.PerDayIn(10000, berlin): "10000/day Europe/Berlin",
		algorithms.PerWeekIn(7, nil):       "7/week UTC",
		algorithms.PerMonthIn(3, time.UTC): "3/month UTC",
		algorithms.PerYearIn(1, berlin):    "1/year Europe/Berlin",
		{Rate: 1, Calendar: 9}:             "1/CalendarUnit(9) UTC",
	} {
		if got := l.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

// TestCalendarDifferential plays random calendar workloads (see
// backendtest.CalendarWorkload: hard boundaries, changes of limit, time
// going back) against the memory backend, miniredis (whose clock follows
// the workload's, so keys expire by their TTL), and a real redis-server
// (each script in a transaction with PERSIST of its keys) against a
// miniredis whose clock stands still: every Result must be identical, and every key written must carry a TTL of exactly its
// ResetAfter rounded up to a millisecond.
func TestCalendarDifferential(t *testing.T) {
	var client *redis.Client
	if redistest.Shared != nil {
		client = redistest.Shared.Client(t)
	}
	real := client != nil
	denied := 0
	for seed := uint64(1); seed <= 40; seed++ {
		work := backendtest.CalendarWorkload(seed, 150, true)
		d := newDifferential(t, work[0].At, client)
		mem, mc, mr, mini, rc := d.mem, d.mc, d.mr, d.mini, d.rc
		onReal, realClock, miniFrozen, frozenClock := d.onReal, d.realClock, d.miniFrozen, d.frozenClock
		prefix := d.prefix + fmt.Sprint(seed) + ":"
		for i, cl := range work {
			d.advance(cl.At)
			want := backendtest.Run(t, mem, mc, "", cl)
			got := backendtest.Run(t, mini, rc, "", cl)
			var gotReal, wantFrozen []algorithms.Result
			if real {
				gotReal = backendtest.Run(t, onReal, realClock, prefix, cl)
				wantFrozen = backendtest.Run(t, miniFrozen, frozenClock, "", cl)
			}
			allowed := true
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("seed %d step %d check %d (%v cost %d at %v): miniredis %+v, memory %+v", seed, i, j, cl.Checks[j].Limit, cl.Checks[j].Cost, cl.At, got[j], want[j])
				}
				if real && gotReal[j] != wantFrozen[j] {
					t.Fatalf("seed %d step %d check %d (%v cost %d at %v): redis-server %+v, miniredis %+v", seed, i, j, cl.Checks[j].Limit, cl.Checks[j].Cost, cl.At, gotReal[j], wantFrozen[j])
				}
				allowed = allowed && got[j].Allowed
			}
			if !allowed {
				denied++
				continue
			}
			for j, ch := range cl.Checks {
				wantTTL := (want[j].ResetAfter + time.Millisecond - 1).Truncate(time.Millisecond)
				if ttl := mr.TTL(ch.Key); ttl != wantTTL {
					t.Fatalf("seed %d step %d: TTL(%s) = %v after ResetAfter %v, want %v", seed, i, ch.Key, ttl, want[j].ResetAfter, wantTTL)
				}
			}
		}
	}
	if denied < 500 {
		t.Fatalf("only %d denied calls; the workload no longer exercises denials", denied)
	}
}

// TestCalendarRetryAfterIsExact: whenever a calendar quota denies with
// RetryAfter d, the same check alone is still denied at now+d-1µs and
// allowed at now+d: d runs exactly to the next calendar boundary.
func TestCalendarRetryAfterIsExact(t *testing.T) {
	t.Parallel()
	probes := 0
	for seed := uint64(100); seed < 130; seed++ {
		work := backendtest.CalendarWorkload(seed, 80, true)
		b, c := newMemory(t)
		for i, cl := range work {
			res := backendtest.Run(t, b, c, "", cl)
			for j, r := range res {
				if r.Allowed || r.RetryAfter == 0 || probes > 2000 {
					continue
				}
				probes++
				fresh, fc := newMemory(t)
				for _, h := range work[:i+1] {
					backendtest.Run(t, fresh, fc, "", h)
				}
				probe := backendtest.Call{At: cl.At.Add(r.RetryAfter - time.Microsecond), Checks: cl.Checks[j : j+1]}
				if got := backendtest.Run(t, fresh, fc, "", probe)[0]; got.Allowed {
					t.Fatalf("seed %d step %d: %v cost %d denied with RetryAfter %v but allowed 1µs earlier", seed, i, cl.Checks[j].Limit, cl.Checks[j].Cost, r.RetryAfter)
				}
				probe.At = cl.At.Add(r.RetryAfter)
				if got := backendtest.Run(t, fresh, fc, "", probe)[0]; !got.Allowed {
					t.Fatalf("seed %d step %d: %v cost %d denied with RetryAfter %v, still denied then: %+v", seed, i, cl.Checks[j].Limit, cl.Checks[j].Cost, r.RetryAfter, got)
				}
			}
		}
	}
	if probes < 200 {
		t.Fatalf("only %d denials probed", probes)
	}
}
