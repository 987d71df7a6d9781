package redisstore_test

import "github.com/redlimit/redlimit/lua"

// luaScript is the script package lua builds under name ("" for none).
func luaScript(name string) string {
	s, _ := lua.Script(name)
	return s
}
