package lua_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/lua/internal/gen"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// TestFixedWindowEndIsAnInstant: on the server's clock a fixed window's
// count names its window by its key's expiry, which a commit and its
// refund must read alike. Read as a PTTL added to the script's now, it
// came out early by however long the script was held between reading its
// now and the PTTL (a loaded server: a compensation 4 s after its commit
// once found the route's window 1 ms off and gave nothing back). It is
// read as an instant: fixed_window_string, given a now 5 ms older than
// the server's present, as a script held 5 ms would have, returns the
// key's expiry exactly (before: 5 ms early).
func TestFixedWindowEndIsAnInstant(t *testing.T) {
	ctx := context.Background()
	client := redistest.Require(t).Client(t)
	srcs, err := gen.Parse(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	var src strings.Builder
	for _, section := range []string{"prelude", "fixed_window.string"} {
		text, err := srcs.Expand(section, nil)
		if err != nil {
			t.Fatal(err)
		}
		src.WriteString(text)
	}
	src.WriteString(`local _, e = fixed_window_string(KEYS[1], redis.call('GET', KEYS[1]), tonumber(ARGV[1]), true)
return e
`)
	key := redistest.Prefix(t) + "{k}"
	end := time.Now().Add(time.Hour).Truncate(time.Hour)
	if err := client.Set(ctx, key, "3", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// as the scripts set it: the window's last ms
	if err := client.PExpireAt(ctx, key, end.Add(-time.Millisecond)).Err(); err != nil {
		t.Fatal(err)
	}
	server, err := client.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	held := server.Add(-5 * time.Millisecond).UnixMicro()
	got, err := redis.NewScript(src.String()).Run(ctx, client, []string{key}, held).Int64()
	if err != nil {
		t.Fatal(err)
	}
	if got != end.UnixMicro() {
		t.Errorf("fixed_window_string(now 5 ms before the present) = end %d µs, want the key's expiry + 1 ms, %d (%v off)", got, end.UnixMicro(), time.Duration(got-end.UnixMicro())*time.Microsecond)
	}
}
