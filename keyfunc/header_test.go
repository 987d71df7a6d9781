package keyfunc

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redlimit/redlimit/algorithms"
)

func TestHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		header  string   // the name passed to Header
		lines   []string // values of X-API-Key, in order
		want    string
		wantErr string
	}{
		{"present", "X-API-Key", []string{"k1"}, "k1", ""},
		{"name any case", "x-api-key", []string{"k1"}, "k1", ""},
		{"first line", "X-API-Key", []string{"k1", "k2"}, "k1", ""},
		{"absent", "X-API-Key", nil, "", `redlimit: keyfunc Header("X-API-Key"): header absent`},
		{"empty", "X-API-Key", []string{""}, "", `redlimit: keyfunc Header("X-API-Key"): header empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			for _, v := range tt.lines {
				r.Header.Add("X-Api-Key", v)
			}
			got, err := mustKey(Header(tt.header))(r)
			if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Errorf("Header(%q) with %q = %q, %v; want %q, %s", tt.header, tt.lines, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestHeaderErrorCategory(t *testing.T) {
	t.Parallel()
	_, err := mustKey(Header("X-API-Key"))(httptest.NewRequest(http.MethodGet, "/", nil))
	var e *Error
	if !errors.Is(err, ErrNoKey) || !errors.As(err, &e) || e.Func != `Header("X-API-Key")` || e.Reason != "header absent" {
		t.Errorf("Header error = %#v, want an *Error wrapping ErrNoKey", err)
	}
	if errors.Is(err, algorithms.ErrInvalidConfig) {
		t.Errorf("Header error %v is also ErrInvalidConfig", err)
	}
}

func TestHeaderAllocs(t *testing.T) {
	fn := mustKey(Header("X-API-Key"))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if n := testing.AllocsPerRun(100, func() { _, _ = fn(r) }); n != 0 {
		t.Errorf("Header, absent: %v allocs, want 0", n)
	}
	r.Header.Set("X-API-Key", "k1")
	if n := testing.AllocsPerRun(100, func() { _, _ = fn(r) }); n != 0 {
		t.Errorf("Header, present: %v allocs, want 0", n)
	}
}
