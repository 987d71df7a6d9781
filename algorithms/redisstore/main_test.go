package redisstore_test

import (
	"os"
	"testing"

	"github.com/redlimit/redlimit/internal/redistest"
)

// TestMain starts the redis-server that the tests share (see
// [redistest.Main]): without it they would skip, in CI too.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
