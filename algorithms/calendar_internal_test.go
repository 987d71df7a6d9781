package algorithms

import (
	"testing"

	"github.com/redlimit/redlimit/algorithms/internal/calc"
)

// TestCalcNumbersCalendarUnits: the backends hand uint8(CalendarUnit) to
// calc, whose constants must number the units alike; and calc's number of
// calendar quotas is no Algorithm's.
func TestCalcNumbersCalendarUnits(t *testing.T) {
	for u, c := range map[CalendarUnit]uint8{Day: calc.Day, Week: calc.Week, Month: calc.Month, Year: calc.Year} {
		if uint8(u) != c {
			t.Errorf("%v is %d, calc numbers it %d", u, uint8(u), c)
		}
	}
	if a := Algorithm(calc.Calendar); a.Valid() {
		t.Errorf("calc.Calendar (%d) is the number of %v", calc.Calendar, a)
	}
}
