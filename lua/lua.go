package lua

import (
	"embed"

	"github.com/redlimit/redlimit/lua/internal/gen"
)

//go:embed *.lua
var files embed.FS

// scripts holds every script, by name, built once from the sources.
var scripts = func() map[string]string {
	built, err := gen.Build(files)
	if err != nil {
		panic(err) // the embedded sources: TestScriptFiles fails first
	}
	m := make(map[string]string, len(built))
	for _, s := range built {
		m[s.Name] = s.Text
	}
	return m
}()

// Script returns the script Redis runs under name, and whether there is
// one: "one_<algorithm>" (one check of an algorithm, named as
// algorithms.Algorithm.String names it, or "one_calendar"),
// "lean_fixed_window" and "lean_gcra", "batch_<algorithm>" and
// "batch_all", "multi", "block", "refund", "cancel", "release" and
// "renew". Each is checked in, with its KEYS, ARGV and reply, as
// docs/scripts/<name>.lua.
func Script(name string) (string, bool) {
	s, ok := scripts[name]
	return s, ok
}
