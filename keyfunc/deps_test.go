package keyfunc

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestNoRedisDependency: keyfunc serves every backend, so building it must
// not compile go-redis nor the Lua scripts.
func TestNoRedisDependency(t *testing.T) {
	t.Parallel()
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	out, err := exec.Command(gotool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/redlimit/redlimit/keyfunc") {
		t.Fatalf("go list -deps . = %q, want it to list keyfunc itself", deps)
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "github.com/redis/") || dep == "github.com/redlimit/redlimit/lua" {
			t.Errorf("keyfunc depends on %s", dep)
		}
	}
}
