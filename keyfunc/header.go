package keyfunc

import (
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// Header returns a Func whose key is the value of the request header name,
// for example an API key:
//
//	apiKey, err := keyfunc.Header("X-API-Key")
//
// When the header appears on several lines, the first value is used, as
// [http.Header.Get] does. A header that is absent or empty reports
// [ErrNoKey].
//
// The value is whatever the client sent: it identifies a client only when
// the application also authenticates it (a valid API key), and a client can
// otherwise mint a fresh bucket per request by changing it. Long values are
// bounded later by the middleware, which hashes them.
//
// Header returns an [*algorithms.ConfigError] when name is empty or is
// not a valid header field name (a request can never carry it), so the
// mistake shows when the rule is built, not as a rule that never applies.
func Header(name string) (Func, error) {
	if name == "" {
		return nil, configError("keyfunc.Header name", "must not be empty")
	}
	if !validHeaderName(name) {
		return nil, configError("keyfunc.Header name", quoteTrunc(name)+" is not a valid header field name")
	}
	fn := "Header(" + strconv.Quote(name) + ")"
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
	}, nil
}

// validHeaderName reports whether name is a token (RFC 9110, section 5.1),
// the only header field names net/http accepts in a request.
func validHeaderName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
