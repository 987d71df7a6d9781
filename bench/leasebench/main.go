// Leasebench measures quota blocks (redlimit.Rule.Blocks, docs/leasing.md)
// on a fresh redis-server it starts itself: see package lease, which make
// peerbench runs too.
//
// Usage, from the repository root: make leasebench, or
//
//	go run ./bench/leasebench -duration 2s -rounds 3 -window 500ms -windows 120
//
// It ends with the line
//
//	lease: hot c=1 X.XX× bare EVALSHA; 4 instances X.XX× unleased; over-admission N in W windows; worst saturated window admitted P% of the limit; Redis calls per admitted request C
package main

import (
	"flag"
	"log"
	"os"
	"time"

	"github.com/redlimit/redlimit/bench/leasebench/lease"
	"github.com/redlimit/redlimit/internal/redistest"
)

func main() {
	var cfg lease.Config
	flag.DurationVar(&cfg.Duration, "duration", 2*time.Second, "length of each throughput measurement")
	flag.IntVar(&cfg.Rounds, "rounds", 3, "interleaved throughput rounds (the median is reported)")
	flag.DurationVar(&cfg.Window, "window", 500*time.Millisecond, "window of the exactness run")
	flag.IntVar(&cfg.Windows, "windows", 120, "windows of the exactness run")
	flag.Int64Var(&cfg.Limit, "limit", 20000, "limit per window of the exactness run")
	flag.Parse()
	log.SetFlags(0)

	srv, err := redistest.Start()
	if err != nil {
		log.Fatalf("leasebench: %v", err)
	}
	defer srv.Close()
	lease.Run(os.Stdout, srv.Addr, cfg)
}
