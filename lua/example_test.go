package lua_test

import (
	"fmt"
	"strings"

	"github.com/redlimit/redlimit/lua"
)

// A script is named after what it is for; a one-check script holds its
// own algorithm and no other.
func ExampleScript() {
	gcra, ok := lua.Script("one_gcra")
	fmt.Println(ok, strings.Contains(gcra, "local function gcra("), strings.Contains(gcra, "local function token_bucket("))
	_, ok = lua.Script("one_leaky_bucket")
	fmt.Println(ok)
	// Output:
	// true true false
	// false
}
