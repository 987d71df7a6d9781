package algorithms_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// 10,000 requests per calendar day in Europe/Berlin: the count starts
// afresh at each midnight there, and a denial waits until the next one.
func ExamplePerDayIn() {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		log.Fatal(err)
	}
	now := time.Date(2028, time.March, 25, 23, 59, 30, 0, berlin)
	store, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	check := []algorithms.Check{{Key: "api:{customer-42}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerDayIn(10_000, berlin)}}
	res := make([]algorithms.Result, 1)
	fmt.Println(check[0].Limit)

	check[0].Cost = 10_000 // the whole day's quota at once
	store.Allow(context.Background(), check, res)
	fmt.Printf("%s allowed=%v remaining=%d reset at %s\n", now.Format("15:04:05"), res[0].Allowed, res[0].Remaining, now.Add(res[0].ResetAfter).Format(time.DateTime))

	check[0].Cost = 1
	store.Allow(context.Background(), check, res)
	fmt.Printf("%s allowed=%v retry after %v\n", now.Format("15:04:05"), res[0].Allowed, res[0].RetryAfter)

	now = now.Add(30 * time.Second) // midnight: a new day, of 23 hours (clocks go forward)
	store.Allow(context.Background(), check, res)
	fmt.Printf("%s allowed=%v remaining=%d reset after %v\n", now.Format("15:04:05"), res[0].Allowed, res[0].Remaining, res[0].ResetAfter)
	// Output:
	// 10000/day Europe/Berlin
	// 23:59:30 allowed=true remaining=0 reset at 2028-03-26 00:00:00
	// 23:59:30 allowed=false retry after 30s
	// 00:00:00 allowed=true remaining=9999 reset after 23h0m0s
}

// A monthly quota follows the calendar: February 2028 has 29 days.
func ExamplePerMonthIn() {
	now := time.Date(2028, time.February, 1, 0, 0, 0, 0, time.UTC)
	store, err := memstore.New(memstore.Config{Now: func() time.Time { return now }})
	if err != nil {
		log.Fatal(err)
	}
	check := []algorithms.Check{{Key: "exports:{acme}", Algorithm: algorithms.FixedWindow, Limit: algorithms.PerMonthIn(100, nil)}}
	res := make([]algorithms.Result, 1)
	store.Allow(context.Background(), check, res)
	fmt.Println(check[0].Limit, "resets after", res[0].ResetAfter, "=", int64(res[0].ResetAfter/(24*time.Hour)), "days")
	// Output:
	// 100/month UTC resets after 696h0m0s = 29 days
}
