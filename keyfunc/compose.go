package keyfunc

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/redlimit/redlimit/internal/keys"
)

// Join returns a Func whose key is the keys of fns joined with ":", in order:
// Join(Route(), IP(...)) keys a request "GET /login:203.0.113.7", one bucket
// per endpoint and client.
//
// Every part is required: the first error from a part is returned as it is,
// so a request missing one part is missing its key (wrapping [ErrNoKey]),
// never keyed by the other parts alone. Wrap a part in [Or] to give it a
// fallback.
//
// The join is unambiguous: in every part but the last, ":" is written "%3A"
// and "%" is written "%25", so no two different lists of parts make the same
// key ("a" + "b:c" is "a:b:c", "a:b" + "c" is "a%3Ab:c"), and a client who
// controls one part cannot reach the bucket of another combination. The last
// part is kept verbatim; put the part most likely to hold ":" there, such as
// an IPv6 key from [IP]: Join(Route(), IP(...)) rather than Join(IP(...),
// Route()).
//
// Join with one Func returns it. Join returns an [*algorithms.ConfigError]
// when fns is empty or holds a nil Func.
func Join(fns ...Func) (Func, error) {
	if err := checkFuncs("keyfunc.Join", fns); err != nil {
		return nil, err
	}
	if len(fns) == 1 {
		return fns[0], nil
	}
	fns = append([]Func(nil), fns...) // the caller may reuse its slice
	return func(r *http.Request) (string, error) {
		var buf [4]string
		parts := buf[:0]
		for _, fn := range fns {
			k, err := fn(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, k)
		}
		return keys.JoinKeys(parts...), nil
	}, nil
}

// Or returns a Func whose key is the key of the first of fns that finds one:
// a fallback chain such as Or(User(...), IP(...)), "the user if signed in,
// else the client's IP". Only [ErrNoKey] moves on to the next Func; any
// other error ([algorithms.ErrInvalidConfig], or any error from a Func of
// your own) is returned at once, so a broken Func is not hidden behind its
// fallback. When every Func reports ErrNoKey, Or returns the last one's
// error.
//
// The keys of the alternatives share one key space: give them distinct
// shapes, for example Or(Join(Const("user"), User(...)), IP(...)), when a
// user ID could look like an IP address.
//
// Or with one Func returns it. Or returns an [*algorithms.ConfigError]
// when fns is empty or holds a nil Func.
func Or(fns ...Func) (Func, error) {
	if err := checkFuncs("keyfunc.Or", fns); err != nil {
		return nil, err
	}
	if len(fns) == 1 {
		return fns[0], nil
	}
	fns = append([]Func(nil), fns...)
	return func(r *http.Request) (k string, err error) {
		for _, fn := range fns {
			k, err = fn(r)
			if err == nil || !errors.Is(err, ErrNoKey) {
				return k, err
			}
		}
		return "", err
	}, nil
}

// checkFuncs returns the error of an empty list or a nil element of a
// composition.
func checkFuncs(name string, fns []Func) error {
	if len(fns) == 0 {
		return configError(name+" fns", "must not be empty")
	}
	for i, fn := range fns {
		if fn == nil {
			return configError(name+" fns["+strconv.Itoa(i)+"]", "must not be nil")
		}
	}
	return nil
}
