package redisstore_test

import (
	"os"
	"testing"

	"github.com/redlimit/redlimit/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }
