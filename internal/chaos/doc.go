// Package chaos is redlimit's fault-schedule harness, shaped the way Jepsen
// shapes one: a workload (the generator and the clients: several
// application instances, each an engine.Engine over its own
// redisstore.Store and go-redis client, driving every algorithm, layered
// rules in two hash slots, concurrency slots, refunds settled after the
// response, Wait, Peek and Reset), a nemesis (a seeded [Schedule] of faults
// injected into a [world.World]), a [History] of everything the clients saw
// and the faults as injected, and a [Check] that reads only the history.
//
// A run is replayable from its seed: the schedule, the fault parameters and
// the workload's choices are all drawn from PCG generators seeded by it.
// Mutation modes ([MutateOveradmit], [MutateLockout]) wrap the store in a
// backend that breaks one promise, to prove the checker can fail.
//
// The command cmd/chaos and `make chaos` run it; docs/reliability.md, "The
// chaos harness", says how to read its output.
package chaos
