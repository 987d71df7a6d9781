package lua_test

import (
	"fmt"
	"strings"

	"github.com/redlimit/redlimit/lua"
)

// Script is the five algorithm files between a prelude and a dispatch; each
// part documents itself.
func ExampleScript() {
	for _, part := range []string{lua.FixedWindow, lua.SlidingLog, lua.SlidingWindow, lua.TokenBucket, lua.GCRA} {
		first, _, _ := strings.Cut(part, "\n")
		fmt.Println(first)
	}
	fmt.Println(strings.Contains(lua.Script, lua.Dispatch))
	// Output:
	// -- Fixed window: hash {s = window start µs, e = window end µs, c = count}.
	// -- Sliding log: sorted set, one member per unit, score = µs. An entry at s
	// -- Sliding window counter: hash {s = start µs of the stored window, e = its
	// -- Token bucket: hash {m = tokens missing from a full bucket, as the time
	// -- GCRA: one string, the theoretical arrival time TAT = a + b/r µs (b < r),
	// true
}

// A one-check script holds its own algorithm and no other.
func ExampleGCRAOne() {
	fmt.Println(strings.Contains(lua.GCRAOne, lua.GCRA), strings.Contains(lua.GCRAOne, lua.TokenBucket))
	fmt.Println(strings.HasSuffix(lua.GCRAOne, "local check = gcra\n"+lua.One))
	// Output:
	// true false
	// true
}
