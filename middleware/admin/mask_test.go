package admin

import "testing"

func TestMaskKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"192.0.2.77", "192.0.2.0/24"},
		{"::ffff:192.0.2.77", "192.0.2.0/24"},
		{"2001:db8:1:2::5", "2001:db8:1::/48"},
		{"2001:db8:1:2::/64", "2001:db8:1::/48"},
		{"10.0.0.0/8", "10.0.0.0/8"},
		{"192.0.2.128/25", "192.0.2.0/24"},
		{"alice", "#2bd806c97f0e"},
		{"h:0123abcd", "h:0123abcd"},
	}
	for _, tt := range tests {
		if got := MaskKey(tt.in); got != tt.want {
			t.Errorf("MaskKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := materialOf("rate:ip:fw:{192.0.2.1}"); got != "192.0.2.1" {
		t.Errorf("materialOf = %q", got)
	}
}
