// Package contract holds what the built-in stores, layers and the limiter
// share about the store contract and do not export: the validation every
// built-in store runs before it stores anything (so they refuse the same
// calls with the same messages), lease ids, and a Backend that allows
// everything for tests.
package contract
