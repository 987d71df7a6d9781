package headers_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/headers"
)

// printHeader prints h one field line at a time, sorted by name.
func printHeader(h http.Header) {
	for _, name := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[name] {
			fmt.Printf("%s: %s\n", name, v)
		}
	}
}

// now is the fixed clock of the examples.
var now = time.Unix(1_767_225_600, 0) // 2026-01-01T00:00:00Z

// The zero Writer writes the X-RateLimit fields with the reset as Unix
// seconds, as GitHub does.
func Example() {
	h := http.Header{}
	var w headers.Writer
	w.Write(h, now, []headers.Policy{{
		Name:   "ip",
		Window: time.Minute,
		Result: algorithms.Result{Allowed: true, Limit: 100, Remaining: 99, ResetAfter: 600 * time.Millisecond},
	}})
	printHeader(h)
	// Output:
	// X-Ratelimit-Limit: 100
	// X-Ratelimit-Remaining: 99
	// X-Ratelimit-Reset: 1767225601
}

// A request checked against two rules and denied by the second: the IETF
// fields list both rules, the X- fields describe the rule that denied it,
// and Retry-After says how long to wait.
func ExampleWriter_Write() {
	policies := []headers.Policy{
		{Name: "ip-burst", Window: time.Second, Result: algorithms.Result{
			Allowed: true, Limit: 10, Remaining: 7, ResetAfter: 300 * time.Millisecond,
		}},
		{Name: "user-hourly", Window: time.Hour, Result: algorithms.Result{
			Allowed: false, Limit: 1000, Remaining: 0, RetryAfter: 11200 * time.Millisecond, ResetAfter: 12 * time.Second,
		}},
	}
	h := http.Header{}
	headers.Writer{Style: headers.Both, Reset: headers.DeltaSeconds}.Write(h, now, policies)
	printHeader(h)
	// Output:
	// Ratelimit: "ip-burst";r=7;t=1, "user-hourly";r=0;t=12
	// Ratelimit-Policy: "ip-burst";q=10;w=1, "user-hourly";q=1000;w=3600
	// Retry-After: 12
	// X-Ratelimit-Limit: 1000
	// X-Ratelimit-Remaining: 0
	// X-Ratelimit-Reset: 12
}

// Header names are canonical, so any spelling finds them.
func ExampleWriter_Write_lookup() {
	h := http.Header{}
	headers.Writer{Style: headers.IETF}.Write(h, now, []headers.Policy{{
		Name: "api", Window: time.Minute,
		Result: algorithms.Result{Allowed: true, Limit: 60, Remaining: 59, ResetAfter: time.Second},
	}})
	fmt.Println(h.Get("RateLimit-Policy"))
	fmt.Println(h.Get("ratelimit"))
	// Output:
	// "api";q=60;w=60
	// "api";r=59;t=1
}

func ExampleWriter_Validate() {
	w := headers.Writer{Style: headers.Style(9)}
	fmt.Println(w.Validate())
	// Output:
	// redlimit: headers.Writer.Style unknown value 9
}

func ExampleRetryAfter() {
	policies := []headers.Policy{
		{Name: "a", Result: algorithms.Result{Allowed: false, Limit: 10, RetryAfter: 2 * time.Microsecond}},
		{Name: "b", Result: algorithms.Result{Allowed: false, Limit: 10, RetryAfter: 2500 * time.Millisecond}},
	}
	fmt.Println(headers.RetryAfter(policies))

	// A cost above capacity can never be allowed: no Retry-After.
	never := []headers.Policy{{Name: "c", Result: algorithms.Result{Allowed: false, Limit: 10, Remaining: 10}}}
	fmt.Println(headers.RetryAfter(never))
	// Output:
	// 3 true
	// 0 false
}

func ExampleDecisive() {
	policies := []headers.Policy{
		{Name: "ip", Result: algorithms.Result{Allowed: true, Limit: 1000, Remaining: 400}},
		{Name: "user", Result: algorithms.Result{Allowed: true, Limit: 100, Remaining: 3}},
		{Name: "route", Result: algorithms.Result{Allowed: true, Limit: 50, Remaining: 20}},
	}
	fmt.Println(policies[headers.Decisive(policies)].Name)
	// Output:
	// user
}
