package calc

import (
	"testing"
	"time"
	_ "time/tzdata" // the tests' zones, whatever the machine has
)

func TestBounds(t *testing.T) {
	zone := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	berlin, ny, kolkata, havana := zone("Europe/Berlin"), zone("America/New_York"), zone("Asia/Kolkata"), zone("America/Havana")
	tests := []struct {
		name       string
		unit       uint8
		loc        *time.Location
		now        string // RFC 3339
		s0, s1, s2 string
	}{
		{"day UTC", Day, nil, "2028-01-31T23:59:59Z", "2028-01-31T00:00:00Z", "2028-02-01T00:00:00Z", "2028-02-02T00:00:00Z"},
		{"day Berlin", Day, berlin, "2028-01-31T23:30:00Z", "2028-02-01T00:00:00+01:00", "2028-02-02T00:00:00+01:00", "2028-02-03T00:00:00+01:00"},
		{"spring forward Berlin (23h)", Day, berlin, "2028-03-26T12:00:00+02:00", "2028-03-26T00:00:00+01:00", "2028-03-27T00:00:00+02:00", "2028-03-28T00:00:00+02:00"},
		{"fall back Berlin (25h)", Day, berlin, "2028-10-29T23:59:00+01:00", "2028-10-29T00:00:00+02:00", "2028-10-30T00:00:00+01:00", "2028-10-31T00:00:00+01:00"},
		{"spring forward New York", Day, ny, "2028-03-12T03:00:00-04:00", "2028-03-12T00:00:00-05:00", "2028-03-13T00:00:00-04:00", "2028-03-14T00:00:00-04:00"},
		{"fall back New York", Day, ny, "2028-11-05T01:30:00-05:00", "2028-11-05T00:00:00-04:00", "2028-11-06T00:00:00-05:00", "2028-11-07T00:00:00-05:00"},
		{"Kolkata", Day, kolkata, "2028-02-28T18:29:59Z", "2028-02-28T00:00:00+05:30", "2028-02-29T00:00:00+05:30", "2028-03-01T00:00:00+05:30"},
		{"midnight skipped (Havana)", Day, havana, "2024-03-10T12:00:00-04:00", "2024-03-10T01:00:00-04:00", "2024-03-11T00:00:00-04:00", "2024-03-12T00:00:00-04:00"},
		{"the day before a skipped midnight", Day, havana, "2024-03-09T23:00:00-05:00", "2024-03-09T00:00:00-05:00", "2024-03-10T01:00:00-04:00", "2024-03-11T00:00:00-04:00"},
		{"leap February", Month, nil, "2028-02-29T12:00:00Z", "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z", "2028-04-01T00:00:00Z"},
		{"common February", Month, berlin, "2027-02-28T23:59:59+01:00", "2027-02-01T00:00:00+01:00", "2027-03-01T00:00:00+01:00", "2027-04-01T00:00:00+02:00"},
		{"December", Month, ny, "2027-12-31T23:00:00-05:00", "2027-12-01T00:00:00-05:00", "2028-01-01T00:00:00-05:00", "2028-02-01T00:00:00-05:00"},
		{"ISO week from Sunday", Week, nil, "2028-01-02T10:00:00Z", "2027-12-27T00:00:00Z", "2028-01-03T00:00:00Z", "2028-01-10T00:00:00Z"},
		{"ISO week from Monday", Week, berlin, "2028-03-27T00:00:00+02:00", "2028-03-27T00:00:00+02:00", "2028-04-03T00:00:00+02:00", "2028-04-10T00:00:00+02:00"},
		{"year", Year, kolkata, "2028-12-31T23:59:59+05:30", "2028-01-01T00:00:00+05:30", "2029-01-01T00:00:00+05:30", "2030-01-01T00:00:00+05:30"},
	}
	us := func(s string) int64 {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixMicro()
	}
	for _, tt := range tests {
		s0, s1, s2 := Bounds(tt.unit, tt.loc, us(tt.now))
		if s0 != us(tt.s0) || s1 != us(tt.s1) || s2 != us(tt.s2) {
			f := func(v int64) string { return time.UnixMicro(v).In(tt.loc).Format(time.RFC3339) }
			t.Errorf("%s: Bounds(%d, %v, %s) = %s, %s, %s; want %s, %s, %s", tt.name, tt.unit, tt.loc, tt.now, f(s0), f(s1), f(s2), tt.s0, tt.s1, tt.s2)
		}
	}
}
