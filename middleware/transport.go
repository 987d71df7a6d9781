package middleware

import (
	"errors"
	"net/http"
	"strings"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/algorithms"
	"github.com/redlimit/redlimit/keyfunc"
)

// TransportConfig configures a [Transport]. The zero value paces by host
// over [http.DefaultTransport].
type TransportConfig struct {
	// Key returns the key material of an outbound request, the same for
	// every rule of the Limiter. Default: the request's host, lower-cased,
	// with its port unless it is the scheme's default ("api.example.com",
	// "api.example.com:8443"), so each host the client calls is paced on
	// its own. keyfunc.Const("partner") paces every host as one. A key
	// func that reports [keyfunc.ErrNoKey] gives the request no key
	// material for any rule (the rule's MissingKey applies); any other
	// error goes to the limiter's error policy: under FailClosed
	// RoundTrip returns it, under FailOpen and Fallback the request is
	// sent unlimited.
	Key keyfunc.Func

	// Next sends the requests once they are allowed. Default
	// [http.DefaultTransport].
	Next http.RoundTripper
}

// Transport is an [http.RoundTripper] that paces a client: before sending
// a request it waits, with [redlimit.Limiter.Wait], until every rule of
// its Limiter allows one more request for the request's key, then hands
// the request to the next RoundTripper. A 10-per-second limit on a
// partner's API becomes
//
//	client := &http.Client{Transport: t} // t from NewTransport(e, TransportConfig{})
//
// where e's rule is {Algorithm: algorithms.GCRA, Limit:
// algorithms.PerSecond(10).WithBurst(1)}: one request every 100ms, from
// any number of goroutines.
//
// On a shared backend (an [algorithms.Backend] from redisstore) the limit
// is shared by every process whose Limiter has the same prefix and rule
// (name and algorithm): ten instances pacing one partner at 10/s send 10
// requests a second in all, not 100. On a memstore each process paces
// alone.
//
// A request that cannot be allowed is not sent: RoundTrip returns the
// error of Wait ([redlimit.ErrNeverAllowed] when no wait can allow it,
// [redlimit.ErrWaitExceedsDeadline] when the wait would outlast the
// request context's deadline, the context's cause when it ends while
// waiting, or the Limiter's error under FailClosed), closes the request's
// body, and http.Client returns it wrapped in a *url.Error: test it with
// [errors.Is]. The wait honours the request's context; give the client
// or the request a deadline.
//
// A Transport is safe for concurrent use. It does not read responses: a
// 429 from the server is the caller's to handle.
type Transport struct {
	engine *redlimit.Limiter
	key    keyfunc.Func
	next   http.RoundTripper
	closed bool // the limiter fails closed: a key func's error refuses the request
}

// NewTransport returns a Transport that paces requests by the rules of e,
// configured by cfg. A nil e, or an e with a concurrency rule, is an
// *[algorithms.ConfigError].
func NewTransport(e *redlimit.Limiter, cfg TransportConfig) (*Transport, error) {
	if e == nil {
		return nil, &algorithms.ConfigError{Field: "engine", Reason: "must not be nil"}
	}
	for _, r := range e.Rules() {
		if r.Algorithm == algorithms.Concurrency {
			return nil, &algorithms.ConfigError{Rule: r.Name, Field: "engine", Reason: "has a concurrency rule: a Transport only waits (redlimit.Limiter.Wait), and could never release its slots"}
		}
	}
	t := &Transport{engine: e, key: cfg.Key, next: cfg.Next, closed: e.Status().Policy == redlimit.FailClosed}
	if t.key == nil {
		t.key = hostKey
	}
	if t.next == nil {
		t.next = http.DefaultTransport
	}
	return t, nil
}

// RoundTrip waits until r is allowed, then sends it with the next
// RoundTripper. See [Transport].
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	material, err := t.key(r)
	switch {
	case err == nil:
		err = t.engine.Wait(r.Context(), material)
	case errors.Is(err, keyfunc.ErrNoKey):
		err = t.engine.Wait(r.Context(), "") // no key material
	case !t.closed:
		err = nil // the error policy lets the request through
	}
	if err != nil {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(r)
}

var errNoHost = &keyfunc.Error{Func: "Transport host", Reason: "request URL has no host", Err: keyfunc.ErrNoKey}

// hostKey is the default TransportConfig.Key: the URL's host, lower-cased,
// without the scheme's default port.
func hostKey(r *http.Request) (string, error) {
	host := r.Host
	if r.URL != nil && r.URL.Host != "" {
		host = r.URL.Host
	}
	if host == "" {
		return "", errNoHost
	}
	scheme := ""
	if r.URL != nil {
		scheme = r.URL.Scheme
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		if port := host[i+1:]; port == "" || port == defaultPort(scheme) {
			host = host[:i]
		}
	}
	return lowerASCII(host), nil
}

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return "-" // no port equals it
}

// lowerASCII lower-cases the ASCII letters of s, without allocating when
// there are none.
func lowerASCII(s string) string {
	for i := range len(s) {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if c := b[j]; 'A' <= c && c <= 'Z' {
					b[j] = c + 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

var _ http.RoundTripper = (*Transport)(nil)
