package lua_test

import (
	"fmt"
	"strings"

	"github.com/redlimit/redlimit/lua"
)

// The scripts that release and renew concurrency leases hold the
// prelude and the concurrency algorithm, and no other.
func ExampleRelease() {
	for _, s := range []string{lua.Release(), lua.Renew()} {
		fmt.Println(strings.Contains(s, "local function concurrency_remove("), strings.Contains(s, "local function gcra("))
	}
	// Output:
	// true false
	// true false
}
