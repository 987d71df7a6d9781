package admin

import (
	"cmp"
	"slices"
)

// mergeEntries returns the entries of list with the counts and errors of
// entries of the same name (name(key)) summed, highest count first (then
// by name), at most n of them, and for each how many entries it merged.
func mergeEntries(list []entry, name func(string) string, n int) ([]entry, []int) {
	idx := make(map[string]int, len(list))
	out := make([]entry, 0, len(list))
	merged := make([]int, 0, len(list))
	for _, e := range list {
		e.Key = name(e.Key)
		if i, ok := idx[e.Key]; ok {
			out[i].Count += e.Count
			out[i].Err += e.Err
			merged[i]++
			continue
		}
		idx[e.Key] = len(out)
		out = append(out, e)
		merged = append(merged, 1)
	}
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int {
		if c := cmp.Compare(out[y].Count, out[x].Count); c != 0 {
			return c
		}
		return cmp.Compare(out[x].Key, out[y].Key)
	})
	order = order[:min(n, len(order))]
	top, counts := make([]entry, len(order)), make([]int, len(order))
	for i, j := range order {
		top[i], counts[i] = out[j], merged[j]
	}
	return top, counts
}
