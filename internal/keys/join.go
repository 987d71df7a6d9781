package keys

import "strings"

// JoinKeys joins key material parts as keyfunc.Join does: ":" between them, and
// in every part but the last ":" written "%3A" and "%" written "%25", so
// that no two different lists of parts give the same key. Adapters that
// compose keys from other inputs (gRPC metadata, a job's fields) use it to
// share buckets with keyfunc.Join. It returns "" for no part.
func JoinKeys(parts ...string) string {
	n := 0
	for i, k := range parts {
		n += len(k) + 1
		if i < len(parts)-1 {
			n += 2 * (strings.Count(k, ":") + strings.Count(k, "%"))
		}
	}
	var b strings.Builder
	b.Grow(n)
	for i, k := range parts {
		if i > 0 {
			b.WriteByte(':')
		}
		if i == len(parts)-1 {
			b.WriteString(k)
		} else {
			writeJoinPart(&b, k)
		}
	}
	return b.String()
}

// writeJoinPart writes a part of a join that is not the last one, escaping
// the separator ':' and the escape character '%'.
func writeJoinPart(b *strings.Builder, k string) {
	for {
		i := strings.IndexAny(k, ":%")
		if i < 0 {
			b.WriteString(k)
			return
		}
		b.WriteString(k[:i])
		if k[i] == ':' {
			b.WriteString("%3A")
		} else {
			b.WriteString("%25")
		}
		k = k[i+1:]
	}
}
