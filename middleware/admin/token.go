package admin

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// Token returns an authorization for Config.Authorize that lets in the
// requests carrying secret: as a bearer token ("Authorization: Bearer
// <secret>", for curl and the CLI) or as the password of HTTP Basic
// authentication, whatever the user name (for a browser, which prompts
// for it). The user name, or "token" for a bearer token, is who the
// request is from. An empty secret lets nobody in. Comparisons take
// constant time.
func Token(secret string) func(*http.Request) (string, bool) {
	want := []byte(secret)
	return func(r *http.Request) (string, bool) {
		if len(want) == 0 {
			return "", false
		}
		if user, pass, ok := r.BasicAuth(); ok {
			if user == "" {
				user = "basic"
			}
			return user, subtle.ConstantTimeCompare([]byte(pass), want) == 1
		}
		auth := r.Header.Get("Authorization")
		if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
			return "token", subtle.ConstantTimeCompare([]byte(strings.TrimSpace(auth[7:])), want) == 1
		}
		return "", false
	}
}
