package keyfunc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

type userKey struct{}

type userID int

func (u userID) String() string {
	if u == 0 {
		return ""
	}
	return "u" + string(rune('0'+u))
}

func withValue(key, v any) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if v != nil {
		r = r.WithContext(context.WithValue(r.Context(), key, v))
	}
	return r
}

func TestUser(t *testing.T) {
	t.Parallel()
	fromCtx := func(r *http.Request) (string, bool) {
		s, ok := r.Context().Value(userKey{}).(string)
		return s, ok
	}
	tests := []struct {
		name    string
		fn      Func
		r       *http.Request
		want    string
		wantErr string
	}{
		{"signed in", mustKey(User(fromCtx)), withValue(userKey{}, "alice"), "alice", ""},
		{"anonymous", mustKey(User(fromCtx)), withValue(userKey{}, nil), "", "redlimit: keyfunc User: no identity"},
		{"empty id", mustKey(User(fromCtx)), withValue(userKey{}, ""), "", "redlimit: keyfunc User: no identity"},
		{"true but empty", mustKey(User(func(*http.Request) (string, bool) { return "", true })), withValue(userKey{}, nil), "", "redlimit: keyfunc User: no identity"},
		{"false wins over id", mustKey(User(func(*http.Request) (string, bool) { return "x", false })), withValue(userKey{}, nil), "", "redlimit: keyfunc User: no identity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.fn(tt.r)
			if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Errorf("User(%s) = %q, %v; want %q, %s", tt.name, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestContextValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		key     any
		r       *http.Request
		want    string
		wantErr string
	}{
		{"string", userKey{}, withValue(userKey{}, "alice"), "alice", ""},
		{"stringer", userKey{}, withValue(userKey{}, userID(7)), "u7", ""},
		{"absent", userKey{}, withValue(userKey{}, nil), "", "redlimit: keyfunc ContextValue(keyfunc.userKey{}): no value in the request context"},
		{"other key", userKey{}, withValue("userKey", "alice"), "", "redlimit: keyfunc ContextValue(keyfunc.userKey{}): no value in the request context"},
		{"empty string", userKey{}, withValue(userKey{}, ""), "", "redlimit: keyfunc ContextValue(keyfunc.userKey{}): empty value in the request context"},
		{"empty stringer", userKey{}, withValue(userKey{}, userID(0)), "", "redlimit: keyfunc ContextValue(keyfunc.userKey{}): empty value in the request context"},
		{"wrong type", userKey{}, withValue(userKey{}, 42), "", "redlimit: keyfunc ContextValue(keyfunc.userKey{}): context value has type int, want string or fmt.Stringer"},
		{"string key", "user", withValue("user", "bob"), "bob", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := mustKey(ContextValue(tt.key))(tt.r)
			if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Errorf("ContextValue(%#v)(%s) = %q, %v; want %q, %s", tt.key, tt.name, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestContextValueCategories(t *testing.T) {
	t.Parallel()
	fn := mustKey(ContextValue(userKey{}))
	if _, err := fn(withValue(userKey{}, nil)); !errors.Is(err, ErrNoKey) {
		t.Errorf("absent value: %v, want ErrNoKey", err)
	}
	// A wrong type must not pass for an anonymous request, or Or would
	// silently fall back.
	if _, err := fn(withValue(userKey{}, 42)); errors.Is(err, ErrNoKey) || !errors.Is(err, algorithms.ErrInvalidConfig) {
		t.Errorf("wrong type: %v, want ErrInvalidConfig and not ErrNoKey", err)
	}
}
