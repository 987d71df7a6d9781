package middleware_test

import (
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin, whatever the machine holds

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/headers"
)

// A calendar quota's headers: X-RateLimit-Reset is the next midnight in the
// quota's zone, Retry-After the seconds until it, and RateLimit-Policy has
// no w (a calendar window has no fixed length).
func TestCalendarHeaders(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// 23:59:30 on the day clocks go forward in Berlin; the next midnight is
	// 23 hours after this one.
	start := time.Date(2028, time.March, 25, 23, 59, 30, 0, berlin)
	midnight := time.Date(2028, time.March, 26, 0, 0, 0, 0, berlin).Unix()
	next := time.Date(2028, time.March, 27, 0, 0, 0, 0, berlin).Unix()
	if next-midnight != 23*3600 {
		t.Fatalf("the day of 2028-03-26 in Berlin lasts %ds, want 23h", next-midnight)
	}
	clock := &settable{T: start}
	mw := newMW(t, newMemory(t, clock.Now), spec{
		Rules: []specRule{{
			Name:      "daily",
			Key:       ipFunc(t),
			Algorithm: algorithms.FixedWindow,
			Limit:     algorithms.PerDayIn(2, berlin),
		}},
		Headers: headers.Writer{Style: headers.Both},
		Now:     clock.Now,
	})
	h := mw.Handler(ok)
	both := func(remaining string, reset int64, retry, t string) map[string]string {
		m := xHeaders("2", remaining, reset, retry)
		m["Ratelimit-Policy"] = `"daily";q=2`
		m["Ratelimit"] = `"daily";r=` + remaining + ";t=" + t
		return m
	}
	steps := []struct {
		at    time.Duration // from start
		code  int
		want  map[string]string
		label string
	}{
		{0, 200, both("1", midnight, "", "30"), "first"},
		{10 * time.Second, 200, both("0", midnight, "", "20"), "second"},
		{20 * time.Second, 429, both("0", midnight, "10", "10"), "third: until midnight"},
		{30 * time.Second, 200, both("1", next, "", "82800"), "at midnight: a new day of 23 hours"},
		{30*time.Second + 23*time.Hour - time.Minute, 200, both("0", next, "", "60"), "a minute before the next midnight"},
		{30*time.Second + 23*time.Hour - time.Second, 429, both("0", next, "1", "1"), "a second before it"},
	}
	for _, st := range steps {
		clock.T = start.Add(st.at)
		w := serve(h, req("GET", "/", "203.0.113.7:5000"))
		checkResponse(t, st.label, w, st.code, st.want)
	}
}

// settable is a clock the test sets.
type settable struct{ T time.Time }

func (c *settable) Now() time.Time { return c.T }
