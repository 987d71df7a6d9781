// Package rulename says what can name a rule (and an admin page's
// source): 1 to 64 characters from [A-Za-z0-9_.-], safe in a storage
// key, a metric label and a URL.
package rulename

// Valid reports whether name can name a rule.
func Valid(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}
