module github.com/redlimit/redlimit/bench/peerbench

go 1.26.0

replace github.com/redlimit/redlimit => ../..

replace github.com/redlimit/redlimit/algorithms/redisstore/rueidisclient => ../../algorithms/redisstore/rueidisclient

require (
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redis/rueidis v1.0.80
	github.com/redlimit/redlimit v0.2.0
	github.com/redlimit/redlimit/algorithms/redisstore/rueidisclient v0.0.0
	github.com/throttled/throttled/v2 v2.15.0
	github.com/ulule/limiter/v3 v3.11.2
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
