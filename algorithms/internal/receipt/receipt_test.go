package receipt_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/internal/receipt"
)

func TestGroups(t *testing.T) {
	r := func(marker string, units int64) algorithms.Refund {
		return algorithms.Refund{Result: algorithms.Result{Receipt: algorithms.Receipt{Marker: marker}}, Units: units}
	}
	refunds := []algorithms.Refund{r("a", 0), r("b", 1), r("a", 2), r("c", 0), r("b", 0)}
	var got []string
	for group, units := range receipt.Groups(refunds) {
		got = append(got, fmt.Sprint(group, units))
	}
	if want := "[[0 2] true [1 4] true [3] false]"; fmt.Sprint(got) != want {
		t.Fatalf("groups %v, want %s", got, want)
	}
	n := 0
	for range receipt.Groups(refunds) {
		n++
		break
	}
	if n != 1 {
		t.Fatalf("%d groups after break, want 1", n)
	}
}

func TestWindow(t *testing.T) {
	checks := []algorithms.Check{{RefundWindow: time.Second}, {}, {RefundWindow: time.Minute}}
	if w := receipt.Window(checks); w != time.Minute {
		t.Fatalf("Window = %v, want the longest, 1m", w)
	}
	if w := receipt.Window(checks[1:2]); w != 0 {
		t.Fatalf("Window of a call with none = %v, want 0", w)
	}
}
