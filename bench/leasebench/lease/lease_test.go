package lease

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// TestRunSmall runs the bench briefly on a real redis-server: its
// exactness run admits requests (a bench whose every check is refused,
// as when its Inputs named no rule, measures nothing) and never more than
// the limit of a window.
func TestRunSmall(t *testing.T) {
	srv := redistest.Require(t)
	var out strings.Builder
	line := Run(&out, srv.Addr, Config{Duration: 50 * time.Millisecond, Rounds: 1, Window: 300 * time.Millisecond, Windows: 3, Limit: 100})
	t.Log(out.String())
	if !strings.Contains(line, "over-admission 0 in 3 windows") {
		t.Errorf("the lease line %q, want over-admission 0 in 3 windows", line)
	}
	m := regexp.MustCompile(`admitted (\d+), offered`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no exactness line in:\n%s", out.String())
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Errorf("the exactness run admitted nothing")
	}
}
