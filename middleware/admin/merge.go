package admin

import (
	"cmp"
	"slices"
)

// mergeEntries returns the entries of a and b with the counts and errors
// of equal keys summed, highest count first (then by key).
func mergeEntries(a, b []entry) []entry {
	idx := make(map[string]int, len(a)+len(b))
	out := make([]entry, 0, len(a)+len(b))
	for _, list := range [][]entry{a, b} {
		for _, e := range list {
			if i, ok := idx[e.Key]; ok {
				out[i].Count += e.Count
				out[i].Err += e.Err
				continue
			}
			idx[e.Key] = len(out)
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(x, y entry) int {
		if c := cmp.Compare(y.Count, x.Count); c != 0 {
			return c
		}
		return cmp.Compare(x.Key, y.Key)
	})
	return out
}
