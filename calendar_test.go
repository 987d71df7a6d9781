package redlimit_test

import (
	"context"
	"log/slog"
	"testing"
	"time"
	_ "time/tzdata" // America/New_York, whatever the machine holds

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/internal/contract"
)

// A calendar quota is validated with its rule: a wrong algorithm or a
// Period fails New with the rule and the field named.
func TestCalendarRuleConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rule redlimit.Rule
		want string
	}{
		{redlimit.Rule{Name: "daily", Algorithm: algorithms.GCRA, Limit: algorithms.PerDayIn(100, nil)},
			`redlimit: rule "daily": Limit.Calendar is a fixed window of calendar periods and needs Algorithm fixed_window, got gcra`},
		{redlimit.Rule{Name: "daily", Algorithm: algorithms.FixedWindow, Limit: algorithms.Limit{Rate: 100, Period: time.Hour, Calendar: algorithms.Day}},
			`redlimit: rule "daily": Limit.Period must be 0 when Limit.Calendar is set (the calendar sets the windows), got 1h0m0s`},
		{redlimit.Rule{Name: "plan", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerSecond(5), Tiers: map[string]algorithms.Limit{"free": algorithms.PerMonthIn(0, nil)}},
			`redlimit: rule "plan": Tiers["free"].Limit.Rate must be > 0, got 0`},
	} {
		_, err := redlimit.New(contract.AllowAll{}, redlimit.Config{Rules: []redlimit.Rule{tt.rule}})
		if err == nil || err.Error() != tt.want {
			t.Errorf("New(%v) = %v, want %q", tt.rule.Limit, err, tt.want)
		}
	}
}

// Wait on a spent calendar quota sleeps exactly until the next midnight
// in the quota's zone (here after a day of 25 hours), then passes.
func TestCalendarWait(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2028, time.November, 5, 0, 0, 0, 0, ny) // clocks go back at 02:00
	m, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var slept []time.Duration
	e, err := redlimit.New(m, redlimit.Config{
		Rules: []redlimit.Rule{{Name: "daily", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerDayIn(2, ny)}},
		Sleep: func(_ context.Context, d time.Duration) error {
			slept = append(slept, d)
			now = now.Add(d)
			return nil
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	for range 2 {
		if err := e.Wait(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(90 * time.Minute)
	if err := e.Wait(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if want := []time.Duration{25*time.Hour - 90*time.Minute}; len(slept) != 1 || slept[0] != want[0] {
		t.Fatalf("Wait slept %v, want %v", slept, want)
	}
	if want := time.Date(2028, time.November, 6, 0, 0, 0, 0, ny); !now.Equal(want) {
		t.Fatalf("Wait returned at %v, want %v", now, want)
	}
}
