package redisstore

import (
	"context"
	"errors"
	"testing"

	"github.com/redlimit/redlimit/internal/redistest"
)

// replyError is a server reply as go-redis types it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

// TestKeyState: which script errors concern the state of the script's keys
// (algorithms.ErrKeyState) and which the server. The real server's replies come first,
// then the Redis 6 forms and server errors met inside a script.
func TestKeyState(t *testing.T) {
	srv := redistest.Require(t)
	c := srv.Client(t)
	ctx := context.Background()
	key := redistest.Prefix(t) + "{list}"
	if err := c.RPush(ctx, key, "x").Err(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		script string
		keys   []string
		want   bool
	}{
		{"return redis.call('GET', KEYS[1])", []string{key}, true},
		{"return redis.call('HMGET', KEYS[1], 'w', 'c')", []string{key}, true},
		{"local x = nil; return x + 1", nil, true},
		{"return redis.call('ZCOUNT', KEYS[1], 'x', '+inf')", []string{key + "2"}, false}, // bad argument, not state
		{"return redis.error_reply('redlimit: unknown algorithm 9')", nil, false},
		{"return redis.call('NOSUCHCOMMAND')", nil, false},
	} {
		err := c.Eval(ctx, tt.script, tt.keys).Err()
		if err == nil {
			t.Fatalf("EVAL %q: no error", tt.script)
		}
		if got := keyState(err); got != tt.want {
			t.Errorf("keyState(%q) = %v, want %v", err, got, tt.want)
		}
	}
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), true},
		{replyError("ERR Error running script (call to f_0a1b): @user_script:10: WRONGTYPE Operation against a key holding the wrong kind of value"), true},
		{replyError("ERR Error running script (call to f_0a1b): @user_script:3: user_script:3: attempt to compare nil with number"), true},
		{replyError("ERR user_script:3: attempt to compare nil with number script: 0a1b, on @user_script:3."), true},
		{replyError("OOM command not allowed when used memory > 'maxmemory'. script: 0a1b, on @user_script:5."), false},
		{replyError("ERR Error running script (call to f_0a1b): @user_script:5: @user_script: 5: -OOM command not allowed when used memory > 'maxmemory'."), false},
		{replyError("READONLY You can't write against a read only replica. script: 0a1b, on @user_script:5."), false},
		{replyError("BUSY Redis is busy running a script."), false},
		{replyError("ERR user_script:1: Script attempted to access nonexistent global variable 'x'"), false},
		{replyError("ERR user_script:"), false},
		{context.DeadlineExceeded, false},
		{errors.New("WRONGTYPE not from the server"), false},
	} {
		if got := keyState(tt.err); got != tt.want {
			t.Errorf("keyState(%q) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
