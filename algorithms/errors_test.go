package algorithms_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"unsafe"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/redisstore"
	"github.com/redlimit/redlimit/internal/redistest"
)

// TestWrongTypeIsKeyState: a key of another Redis type fails its checks
// with ErrKeyState (and ErrBackend) naming the keys, under every algorithm,
// alone, with other checks, and pipelined among concurrent calls on sound
// keys, which are decided as usual.
func TestWrongTypeIsKeyState(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	ctx := context.Background()
	b, err := redisstore.New(c, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	prefix := redistest.Prefix(t)
	stray := prefix + "{stray}"
	if err := c.RPush(ctx, stray, "x").Err(); err != nil {
		t.Fatal(err)
	}
	isKeyState := func(err error, keys ...string) bool {
		var be *algorithms.BackendError
		return errors.Is(err, algorithms.ErrKeyState) && errors.Is(err, algorithms.ErrBackend) &&
			errors.As(err, &be) && slices.Equal(be.Keys, keys)
	}
	for _, alg := range algorithms.Algorithms {
		limit := algorithms.PerMinute(10)
		one := []algorithms.Check{{Key: stray, Algorithm: alg, Limit: limit}}
		if err := b.Allow(ctx, one, make([]algorithms.Result, 1)); !isKeyState(err, stray) {
			t.Errorf("%v: Allow(wrong-type key) = %v, want ErrKeyState naming %q", alg, err, stray)
		}
		sound := prefix + alg.String() + "{stray}"
		two := []algorithms.Check{{Key: sound, Algorithm: alg, Limit: limit}, {Key: stray, Algorithm: alg, Limit: limit}}
		if err := b.Allow(ctx, two, make([]algorithms.Result, 2)); !isKeyState(err, sound, stray) {
			t.Errorf("%v: Allow(sound key, wrong-type key) = %v, want ErrKeyState naming both", alg, err)
		}
	}

	// 64 concurrent callers share pipelines: the stray key's calls fail
	// alone.
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for i := range errs {
		wg.Go(func() {
			key := stray
			if i%2 == 1 {
				key = prefix + "{sound" + string(rune('a'+i%26)) + "}"
			}
			for range 20 {
				if err := b.Allow(ctx, []algorithms.Check{{Key: key, Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(1000)}}, make([]algorithms.Result, 1)); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%2 == 0 && !isKeyState(err, stray) || i%2 == 1 && err != nil {
			t.Errorf("concurrent caller %d: %v", i, err)
		}
	}

	// An error of the server is not about a key's state.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	err = b.Allow(canceled, []algorithms.Check{{Key: prefix + "{k}", Algorithm: algorithms.GCRA, Limit: algorithms.PerMinute(10)}}, make([]algorithms.Result, 1))
	if err == nil || errors.Is(err, algorithms.ErrKeyState) {
		t.Errorf("Allow(canceled context) = %v, want an error that is not ErrKeyState", err)
	}
}

// A Result stays 64 bytes (Allowed and Provisional side by side): the
// plain way to ask a Backend allocates one per call.
func TestResultSize(t *testing.T) {
	if n := unsafe.Sizeof(algorithms.Result{}); n != 64 {
		t.Fatalf("a Result is %d bytes, want 64", n)
	}
}
