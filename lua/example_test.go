package lua_test

import (
	"fmt"
	"strings"

	"github.com/redlimit/redlimit/lua"
)

// Multi holds the five algorithms between a prelude and a dispatch; each
// part documents itself.
func ExampleMulti() {
	for _, line := range strings.Split(lua.Multi(), "\n") {
		for _, head := range []string{"-- Fixed window:", "-- Sliding log:", "-- Sliding window counter:", "-- Token bucket:", "-- GCRA:"} {
			if strings.HasPrefix(line, head) {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// -- Fixed window: two layouts, one per clock.
	// -- Sliding log: sorted set, one member per unit, score = µs. An entry at s
	// -- Sliding window counter: hash {s = start µs of the stored window, e = its
	// -- Token bucket: hash {m = tokens missing from a full bucket, as the time
	// -- GCRA: one string, the theoretical arrival time TAT = a + b/r µs (b < r),
}

// A one-check script holds its own algorithm and no other.
func ExampleSingle() {
	gcra := lua.Single("gcra")
	fmt.Println(strings.Contains(gcra, "local function gcra("), strings.Contains(gcra, "local function token_bucket("))
	fmt.Println(strings.Contains(gcra, "local check, alg = gcra, '5'\n"), lua.Single("leaky_bucket") == "")
	// Output:
	// true false
	// true true
}
