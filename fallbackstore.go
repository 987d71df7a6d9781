package redlimit

import (
	"reflect"
	"sync"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
)

// fallbacks holds the default fallback of each primary backend in use:
// the Engines a process builds by separate calls of New on one backend
// (a middleware per route group, a gRPC limiter beside them) share one
// in-memory fallback, so that a key two of them decide is held to the
// instance's share once, not once per Limiter.
var fallbacks struct {
	sync.Mutex
	m map[algorithms.Backend]*sharedFallback
}

type sharedFallback struct {
	store *memstore.Store
	refs  int
}

// defaultFallback returns the in-memory fallback of primary, shared with
// every Limiter on the same primary until each has released it (Close).
// A primary that cannot be a map key (a struct value holding a slice, say)
// gets a fallback of its own.
func defaultFallback(primary algorithms.Backend) (algorithms.Backend, func(), error) {
	if primary == nil || !reflect.ValueOf(primary).Comparable() {
		mem, err := memstore.New(memstore.Config{})
		return mem, nil, err
	}
	fallbacks.Lock()
	defer fallbacks.Unlock()
	f := fallbacks.m[primary]
	if f == nil {
		mem, err := memstore.New(memstore.Config{})
		if err != nil {
			return nil, nil, err
		}
		f = &sharedFallback{store: mem}
		if fallbacks.m == nil {
			fallbacks.m = make(map[algorithms.Backend]*sharedFallback)
		}
		fallbacks.m[primary] = f
	}
	f.refs++
	var once sync.Once
	return f.store, func() {
		once.Do(func() {
			fallbacks.Lock()
			defer fallbacks.Unlock()
			if f.refs--; f.refs == 0 && fallbacks.m[primary] == f {
				delete(fallbacks.m, primary)
			}
		})
	}, nil
}
