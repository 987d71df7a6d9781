package engine

// MaxStalled is maxStalled, for the tests of the bound on abandoned calls.
const MaxStalled = maxStalled
