package memstore_test

import (
	"context"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin, whatever the machine holds

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// A calendar quota's check allocates nothing: its windows are computed
// on the stack, from the zone's cached rules.
func TestCalendarAllocs(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2028, time.March, 26, 1, 59, 0, 0, berlin)
	m, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	checks := []algorithms.Check{
		{Key: "day:{a}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerDayIn(1<<40, berlin)},
		{Key: "month:{a}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMonthIn(1<<40, berlin)},
	}
	res := make([]algorithms.Result, 2)
	ctx := context.Background()
	if err := m.Allow(ctx, checks, res); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() { m.Allow(ctx, checks, res) }); n != 0 {
		t.Errorf("Allow of two calendar quotas: %v allocations, want 0", n)
	}
}

func BenchmarkCalendar(b *testing.B) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2028, time.March, 26, 1, 59, 0, 0, berlin)
	m, _ := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	for _, bc := range []struct {
		name  string
		alg   algorithms.Algorithm
		limit algorithms.Limit
	}{
		{"fixed_window", algorithms.FixedWindow, algorithms.Limit{Rate: 1 << 40, Period: 24 * time.Hour}},
		{"day", algorithms.FixedWindow, algorithms.PerDayIn(1<<40, berlin)},
		{"month", algorithms.FixedWindow, algorithms.PerMonthIn(1<<40, berlin)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			checks := []algorithms.Check{{Key: "k:{" + bc.name + "}", Algorithm: bc.alg, Limit: bc.limit}}
			res := make([]algorithms.Result, 1)
			b.ReportAllocs()
			for b.Loop() {
				m.Allow(context.Background(), checks, res)
			}
		})
	}
}
