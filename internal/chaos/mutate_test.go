package chaos

import (
	"slices"
	"testing"
)

// TestDropMarker: the nocompensate mutation points a compensation (mode
// 1 of the dispatch script, a commit marker last among its keys) at
// another marker of the same slot, and leaves every other script alone.
func TestDropMarker(t *testing.T) {
	t.Parallel()
	marker := "p:late-p:fw:{i0w0}:commit:abc"
	for _, tc := range []struct {
		name string
		args []any
		want []any
	}{
		{"a compensation",
			[]any{"evalsha", "sha", 2, "p:late-p:fw:{i0w0}", marker, int64(0), 1, int64(1)},
			[]any{"evalsha", "sha", 2, "p:late-p:fw:{i0w0}", marker + ":dropped", int64(0), 1, int64(1)}},
		{"a compensation sent with its source (NOSCRIPT)",
			[]any{"eval", "src", 2, "p:late-p:fw:{i0w0}", marker, int64(0), 1},
			[]any{"eval", "src", 2, "p:late-p:fw:{i0w0}", marker + ":dropped", int64(0), 1}},
		{"a part's decision (mode 3)",
			[]any{"evalsha", "sha", 3, "p:late-p:fw:{i0w0}", "p:late-p:fw:{i0w0}:pending", marker, int64(0), 3},
			nil},
		{"a cancel (ARGV[2] the marker's TTL)",
			[]any{"evalsha", "sha", 2, "p:late-p:fw:{i0w0}", marker, int64(0), int64(5000)},
			nil},
		{"a refund (ARGV[2] the commit's now)",
			[]any{"evalsha", "sha", 2, "p:late-q:fw:{i0w0}", marker, int64(0), int64(1_700_000_000_000_000)},
			nil},
		{"another command", []any{"get", "k"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := tc.want
			if want == nil {
				want = slices.Clone(tc.args)
			}
			dropMarker(tc.args)
			if !slices.Equal(tc.args, want) {
				t.Fatalf("dropMarker = %v, want %v", tc.args, want)
			}
		})
	}
}
