-- GCRA: one string, the theoretical arrival time TAT = a + b/r µs (b < r),
-- the instant the bucket is full again, so the emission interval u/r µs is
-- exact, followed by the full window tau = ceil(cap*u/r) µs of the limit
-- that wrote it. It is "<a>/<tau>" when b is 0, as it always is when the
-- interval is a whole number of µs, else "<a>:<b>:<r>/<tau>", r being the
-- refill of the limit that wrote it. Values written before tau was stored
-- ("<a>", "<a>:<b>:<r>", and "<a>:<b>" read with the current r) are read as
-- written under another limit. diff = TAT - now in scaled units is the
-- key's time-debt; a check of cost n passes when diff + n*u <= cap*u.
-- Under the limit that wrote it the debt is never cut (more than a full
-- bucket means the clock went back: the key waits for it); across a change
-- of limit it is kept, cut to one full bucket of the new limit
-- (bucket_debt, in the prelude), as the token bucket does. This is the hot
-- path of the common case, written flat: every function call costs in
-- Redis.

-- gcra_tat parses a stored TAT into (a, b, rs, tau); nil if it is not one,
-- tau nil if the value predates it.
local function gcra_tat(v, r)
  local tw
  local s = string.find(v, '/', 1, true)
  if s then
    tw = tonumber(string.sub(v, s + 1))
    v = string.sub(v, 1, s - 1)
  end
  local a = tonumber(v)
  if a then return a, 0, r, tw end
  local sa, sb, sr = string.match(v, '^(%d+):(%d+):(%d+)$')
  if sa then return tonumber(sa), tonumber(sb), tonumber(sr), tw end
  sa, sb = string.match(v, '^(%d+):(%d+)$')
  return tonumber(sa), tonumber(sb), r, tw
end

-- gcra_write stores the TAT now + diff/r µs of a limit of full window tau,
-- to expire when it is reached (see bucket_ttl in the prelude).
local function gcra_write(key, diff, r, now, tau)
  local a, b = fmt(now + floor(diff / r)), diff % r
  if b ~= 0 then a = a .. ':' .. fmt(b) .. ':' .. fmt(r) end
  redis.call('SET', key, a .. '/' .. fmt(tau), 'PX', bucket_ttl(floor((diff + r - 1) / r)))
end

local function gcra(key, cap, _, r, u, cost, now, commit)
  -- diff: 0 for no state or a TAT in the past (a full bucket)
  local full = cap * u
  local tau = floor((full + r - 1) / r)
  local diff = 0
  local v = redis.call('GET', key)
  if v then
    local a, b, rs, tw = gcra_tat(v, r)
    if a and b and rs then
      local cut
      diff, cut = bucket_debt(a, b, rs, now, r, full, tw == tau)
      if cut then gcra_write(key, diff, r, now, tau) end
    end
  end
  local remaining = floor((full - diff) / u)
  if cost > cap then return 0, remaining, 0, floor((diff + r - 1) / r) end
  local nxt = diff + cost * u
  if nxt > full then return 0, remaining, floor((nxt - full + r - 1) / r), floor((diff + r - 1) / r) end
  if commit then gcra_write(key, nxt, r, now, tau) end
  return 1, floor((full - nxt) / u), 0, floor((nxt + r - 1) / r), nxt, r, now, tau
end

-- Refund: move the TAT back by the cost's emission time (no more than
-- refund_debt gives back, from the commit's horizon less what refunds
-- gave back since it: see refund_since), evaluated at now (the commit's own time, at,
-- right after it), not below now. A TAT at or before now is a full
-- bucket: the key is deleted.
local function gcra_refund(key, cap, _, r, u, cost, at, reset, now, mark)
  now = now or at
  local v = redis.call('GET', key)
  if not v then return end
  local full = cap * u
  local tau = floor((full + r - 1) / r)
  local a, b, rs, tw = gcra_tat(v, r)
  if not (a and b and rs) then return end
  local since, rec = refund_since(key, mark, at, reset)
  local give = refund_debt(cost * u, at, reset - since, now, r)
  refund_add(rec, ceil_div(give, r), now, tau)
  local diff = bucket_debt(a, b, rs, now, r, full, tw == tau) - give
  if diff <= 0 then
    redis.call('DEL', key)
    return
  end
  gcra_write(key, diff, r, now, tau)
end
