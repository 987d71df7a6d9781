package redisstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// scripterOnly is a redis.Scripter that is no go-redis client: it cannot
// DEL.
type scripterOnly struct{ redis.Scripter }

// TestReset: on a real redis-server, Reset deletes the keys it names, so
// a denied key is allowed at once, and leaves the others; a client that
// cannot DEL is an ErrUnsupported. (The key-first API's tests reset on a
// real cluster.)
func TestReset(t *testing.T) {
	client := redistest.Require(t).Client(t)
	b, err := redisstore.New(client, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	p := redistest.Prefix(t)
	allow := func(key string) algorithms.Result {
		res := make([]algorithms.Result, 1)
		if err := b.Allow(ctx, []algorithms.Check{{Key: key, Algorithm: algorithms.TokenBucket, Limit: algorithms.PerHour(1)}}, res); err != nil {
			t.Fatal(err)
		}
		return res[0]
	}
	a, other := p+"{a}", p+"{b}"
	allow(a)
	allow(other)
	if allow(a).Allowed {
		t.Fatal("second unit of a 1/hour limit allowed")
	}
	if err := b.Reset(ctx, []string{a, p + "{missing}", ""}); err != nil {
		t.Fatal(err)
	}
	if r := allow(a); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("after Reset: %+v, want allowed", r)
	}
	if allow(other).Allowed {
		t.Fatal("Reset of one key reset another")
	}
	s, _ := redisstore.New(scripterOnly{client}, redisstore.Config{})
	if err := s.Reset(ctx, []string{a}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Reset on a client without DEL = %v, want ErrUnsupported", err)
	}
}
