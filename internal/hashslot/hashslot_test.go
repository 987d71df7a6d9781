package hashslot_test

import (
	"testing"

	"github.com/redlimit/redlimit/internal/hashslot"
)

// TestOf checks Of against values CLUSTER KEYSLOT answered
// (redis-server 7.0); redisstore's TestCluster/HashSlot compares more keys live.
func TestOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key  string
		slot int
	}{
		{"", 0},
		{"123456789", 12739},
		{"foo", 12182},
		{"bar", 5061},
		{"{user1000}.following", 3443},
		{"{user1000}.followers", 3443},
		{"foo{}{bar}", 8363}, // empty tag: the whole key
		{"foo{{bar}}zap", 4015},
		{"foo{bar}{zap}", 5061}, // the first tag only
		{"{", 4092},
		{"}", 12090},
		{"{}", 15257},
		{"a{b", 13340},
		{"a}b{c}", 7365},
		{"rate:ip:{203.0.113.7}", 8508},
		{"rate:user:{alice}", 749},
		{"rate:route:{POST /pay}", 940},
		{"rate:ip:{2001:db8::1}", 3621},
		{"ключ", 10303},
		{"{\x00\xff}", 7920},
		{"rate:login:{héllo wörld}", 7849},
	} {
		if got := hashslot.Of(tc.key); got != tc.slot {
			t.Errorf("Of(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}
