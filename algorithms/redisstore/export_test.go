package redisstore

// MarkerKeys returns the pending marker of key and a commit marker of a
// call's part whose first key is key.
func MarkerKeys(key string) []string {
	return []string{pendingKey(key), commitKey(key, newCommitID())}
}
