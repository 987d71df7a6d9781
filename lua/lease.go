package lua

// The scripts of concurrency leases: the prelude, concurrency.lua, then
// the entry point.
var (
	release = source("prelude") + source("concurrency") + source("now") + source("release")
	renew   = source("prelude") + source("concurrency") + source("now") + source("renew")
)

// Release returns the script that frees the slots of concurrency leases
// (see release.lua).
func Release() string { return release }

// Renew returns the script that extends the concurrency leases still held
// (see renew.lua).
func Renew() string { return renew }
