package algorithms

// tokenBucket mirrors lua/token_bucket.lua. Tokens are kept in scaled units:
// one token is p.u units and the bucket refills p.r units per µs, so the
// refill is exact (no float, no whole-second rounding). A denied check stores
// nothing, so the refill accrued since the last allowed check is never lost.
// A clock that goes back refills nothing.
func (s *state) tokenBucket(p *prepared, now int64, exists, commit bool) outcome {
	full := p.cap * p.u
	tokens, last := full, now
	if exists {
		tokens, last = min(s.a, full), s.b
	}
	base := max(last, now)
	if elapsed := now - last; elapsed > 0 && tokens < full {
		if elapsed >= ceilDiv(full-tokens, p.r) {
			tokens = full
		} else {
			tokens += elapsed * p.r
		}
	}
	need := p.cost * p.u
	switch {
	case p.cost > p.cap:
		return outcome{remaining: tokens / p.u, reset: base + ceilDiv(full-tokens, p.r) - now}
	case tokens < need:
		return outcome{remaining: tokens / p.u, retry: base + ceilDiv(need-tokens, p.r) - now, reset: base + ceilDiv(full-tokens, p.r) - now}
	}
	tokens -= need
	if commit {
		s.a, s.b = tokens, base
	}
	return outcome{allowed: true, remaining: tokens / p.u, reset: base + ceilDiv(full-tokens, p.r) - now}
}
