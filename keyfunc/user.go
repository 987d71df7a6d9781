package keyfunc

import (
	"fmt"
	"net/http"
	"reflect"
)

// User returns a Func whose key is the identity fn finds in the request,
// typically the user or tenant ID an authentication middleware stored in the
// request's context:
//
//	user, err := keyfunc.User(func(r *http.Request) (string, bool) {
//		u, ok := auth.FromContext(r.Context())
//		return u.ID, ok
//	})
//
// fn reporting false, or an empty identity, means an anonymous request and
// reports [ErrNoKey]; combine with [Or] to fall back to the client's IP.
// fn must be safe for concurrent use and must not modify the request.
//
// User returns an [*algorithms.ConfigError] when fn is nil.
func User(fn func(*http.Request) (string, bool)) (Func, error) {
	if fn == nil {
		return nil, configError("keyfunc.User fn", "must not be nil")
	}
	anonymous := noKey("User", "no identity")
	return func(r *http.Request) (string, error) {
		id, ok := fn(r)
		if !ok || id == "" {
			return "", anonymous
		}
		return id, nil
	}, nil
}

// ContextValue returns a Func whose key is the value stored in the request's
// context under key: a string, or a [fmt.Stringer] whose String method gives
// the key. It suits applications whose authentication middleware stores the
// caller's identity directly:
//
//	user, err := keyfunc.ContextValue(userIDKey{})
//
// An absent (nil) value or an empty string reports [ErrNoKey]. A value of any
// other type is a programming error and reports an [*Error] of category
// [algorithms.ErrInvalidConfig], so it is not silently treated as anonymous.
//
// ContextValue returns an [*algorithms.ConfigError] when key is nil or not
// comparable, keys under which no value can be stored (where
// [context.WithValue] would panic).
func ContextValue(key any) (Func, error) {
	if key == nil {
		return nil, configError("keyfunc.ContextValue key", "must not be nil")
	}
	if !reflect.ValueOf(key).Comparable() {
		return nil, configError("keyfunc.ContextValue key", fmt.Sprintf("must be comparable, got type %T", key))
	}
	fn := fmt.Sprintf("ContextValue(%#v)", key)
	absent := noKey(fn, "no value in the request context")
	empty := noKey(fn, "empty value in the request context")
	return func(r *http.Request) (string, error) {
		var s string
		switch v := r.Context().Value(key).(type) {
		case nil:
			return "", absent
		case string:
			s = v
		case fmt.Stringer:
			s = v.String()
		default:
			return "", badValue(fn, fmt.Sprintf("context value has type %T, want string or fmt.Stringer", v))
		}
		if s == "" {
			return "", empty
		}
		return s, nil
	}, nil
}
