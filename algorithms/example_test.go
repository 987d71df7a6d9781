package algorithms_test

import (
	"fmt"

	"github.com/redlimit/redlimit/algorithms"
)

// Invalid limits are rejected with an error naming the field.
func ExampleLimit_Validate() {
	fmt.Println(algorithms.PerSecond(10).WithBurst(-1).Validate(algorithms.TokenBucket))
	fmt.Println(algorithms.Limit{Rate: 5}.Validate(algorithms.FixedWindow))
	fmt.Println(algorithms.PerMinute(100).WithBurst(20).Validate(algorithms.GCRA))
	// Output:
	// redlimit: Limit.Burst must be >= 0, got -1
	// redlimit: Limit.Period must be >= 1µs, got 0s
	// <nil>
}
