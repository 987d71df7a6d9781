// Package chaos is redlimit's fault-schedule harness, shaped the way Jepsen
// shapes one: a workload (the generator and the clients: several
// application instances, each an redlimit.Limiter over its own
// redisstore.Store and go-redis client, driving every algorithm, layered
// rules in two hash slots, concurrency slots, refunds settled after the
// response, late compensations on keys of each worker's own, Wait, Peek and
// Reset), a nemesis (a seeded [Schedule] of faults injected into a
// [world.World]), a [History] of everything the clients saw and the faults
// as injected, and a [Check] that reads only the history: over the limit,
// lockout, a slot leaked, a refund given twice or a refund, cancel or
// compensation that returned success and gave nothing back
// ([VRefundLost]), a call past its Timeout.
//
// A run is replayable from its seed: the schedule, the fault parameters and
// the workload's choices are all drawn from PCG generators seeded by it.
// Mutation modes ([Mutations]) break one promise, to prove the checker can
// fail: a backend wrapped around the store ([MutateOveradmit],
// [MutateLockout], [MutateNoRefund]) or a hook on the instances' client
// ([MutateNoCompensate]).
//
// The command cmd/chaos and `make chaos` run it; docs/reliability.md, "The
// chaos harness", says how to read its output.
package chaos
