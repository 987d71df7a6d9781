// The Gin adapter: the middleware's decisions, headers and 429 in a Gin engine.
package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/gin-gonic/gin"

	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/algorithms/memstore"
	"github.com/redlimit/redlimit/middleware"
	"github.com/redlimit/redlimit/middleware/ginlimit"
)

func main() {
	gin.SetMode(gin.ReleaseMode)
	mem, err := memstore.New(memstore.Config{})
	if err != nil {
		fail(err)
	}
	perIP, err := middleware.PerIP(mem, algorithms.GCRA, algorithms.PerMinute(2))
	if err != nil {
		fail(err)
	}
	defer perIP.Close()
	r := gin.New()
	r.Use(ginlimit.Handler(perIP))
	r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	var got []string
	for range 3 {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		got = append(got, fmt.Sprintf("%d remaining=%s", w.Code, w.Header().Get("X-RateLimit-Remaining")))
	}
	want := []string{"200 remaining=1", "200 remaining=0", "429 remaining=0"}
	for i := range want {
		if got[i] != want[i] {
			fail(fmt.Errorf("request %d: %s, want %s", i+1, got[i], want[i]))
		}
	}
	fmt.Println("ok: gin adapter: 200, 200, 429")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "FAIL:", err)
	os.Exit(1)
}
