package denycache

// Held returns how many entries d holds, live or expired.
func (d *Cache) Held() int64 { return d.held.Load() }
