package main

import "github.com/redlimit/redlimit/keyfunc"

// mustKey returns fn, failing the test (by a panic) on err: for key funcs
// built from arguments known to be valid.
func mustKey(fn keyfunc.Func, err error) keyfunc.Func {
	if err != nil {
		panic(err)
	}
	return fn
}
