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
	// -- Fixed window: hash {w = window index, c = count}. Windows are aligned to
	// -- Sliding log: sorted set, one member per unit, score = µs. An entry at s
	// -- Sliding window counter: hash {w = window index, c = count in w, p = count
	// -- Token bucket: hash {t = tokens in scaled units, ts = last refill µs}. One
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
