// Package memstore is redlimit's in-process backend: a [Store] keeps every
// key's state in memory and decides with the same arithmetic as the Redis
// scripts, field for field, so that it answers exactly as
// redisstore.Store does (the conformance vectors and a differential test
// check it). It serves single-instance services, tests, and the fallback
// while Redis is unreachable.
//
//	store, err := memstore.New(memstore.Config{})
//
// A check on an existing key does not allocate; [Config].MaxKeys bounds
// the memory (see [Store] for the bound and what is evicted at the cap).
package memstore
