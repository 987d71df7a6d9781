package keyfunc

import (
	"net/http"
	"net/textproto"
	"strconv"
)

// Header returns a Func whose key is the value of the request header name,
// for example an API key:
//
//	keyfunc.Header("X-API-Key")
//
// When the header appears on several lines, the first value is used, as
// [http.Header.Get] does. A header that is absent or empty reports
// [ErrNoKey].
//
// The value is whatever the client sent: it identifies a client only when
// the application also authenticates it (a valid API key), and a client can
// otherwise mint a fresh bucket per request by changing it. Long values are
// bounded later by [Sanitize], which hashes them.
//
// An empty name yields a Func that reports [ErrInvalidConfig].
func Header(name string) Func {
	fn := "Header(" + strconv.Quote(name) + ")"
	if name == "" {
		err := badConfig(fn, "empty header name")
		return func(*http.Request) (string, error) { return "", err }
	}
	key := textproto.CanonicalMIMEHeaderKey(name)
	absent := noKey(fn, "header absent")
	empty := noKey(fn, "header empty")
	return func(r *http.Request) (string, error) {
		v := r.Header[key]
		if len(v) == 0 {
			return "", absent
		}
		if v[0] == "" {
			return "", empty
		}
		return v[0], nil
	}
}
