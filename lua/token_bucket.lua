-- Token bucket: hash {m = tokens missing from a full bucket, as the time
-- they take to refill in 1/r µs; r = "<r>/<tau>", the refill of the limit
-- that wrote m and that limit's full window tau = ceil(cap*u/r) µs; ts =
-- the instant m was counted at, µs}. One token is u units; the bucket
-- refills r units per µs, exactly. The bucket is full at ts + m/r µs, the
-- instant GCRA stores as its TAT, read by the same bucket_debt (prelude):
-- under the limit that wrote it the debt is never cut (more than a full
-- bucket means the clock went back: the key waits for it); across a change
-- of limit it is kept, cut to one full bucket of the new limit, and the two
-- algorithms make the same decisions. A denied check writes nothing (but a
-- cut debt), so no accrued refill is ever lost. State written before tau
-- was stored (r a bare number) is read as written under another limit;
-- state written before m was stored, {t = tokens in scaled units, ts}, is
-- read under the current limit.

-- token_bucket_write stores a debt of m scaled units at now, full in reset
-- µs, under a limit of full window tau (its TTL: bucket_ttl, prelude).
local function token_bucket_write(key, m, r, now, reset, tau)
  redis.call('HSET', key, 'm', fmt(m), 'r', fmt(r) .. '/' .. fmt(tau), 'ts', fmt(now))
  redis.call('PEXPIRE', key, bucket_ttl(reset))
end

-- tb_load returns the key's time-debt at now in 1/r µs (0 for no state, or
-- a full bucket) and whether the key holds state; it stores a cut debt.
local function tb_load(key, full, r, now)
  local v = redis.call('HMGET', key, 'm', 'r', 'ts')
  local m, ts = tonumber(v[1]), tonumber(v[3])
  if not ts then return 0, false end
  local tau = floor((full + r - 1) / r)
  local rs, tw
  if v[2] then
    local s = string.find(v[2], '/', 1, true)
    if s then
      rs, tw = tonumber(string.sub(v[2], 1, s - 1)), tonumber(string.sub(v[2], s + 1))
    else
      rs = tonumber(v[2])
    end
  end
  if not (m and rs) then
    local t = tonumber(redis.call('HGET', key, 't'))
    if not t then return 0, false end
    if t > full then t = full end
    m, rs = full - t, r
  end
  local diff, cut
  local elapsed = now - ts
  if rs == r and elapsed >= 0 then
    -- the common case, inline: bucket_debt's result when the refill is
    -- unchanged and the clock went forward (a product too large to be
    -- exact is far above m anyway)
    diff = 0
    if elapsed * r < m then diff = m - elapsed * r end
    cut = diff > full and tw ~= tau
    if cut then diff = full end
  else
    diff, cut = bucket_debt(ts + floor(m / rs), m % rs, rs, now, r, full, tw == tau)
  end
  if cut then token_bucket_write(key, diff, r, now, ceil_div(diff, r), tau) end
  return diff, true, tau
end

local function token_bucket(key, cap, _, r, u, cost, now, commit)
  local full = cap * u
  local diff, _, tau = tb_load(key, full, r, now)
  tau = tau or floor((full + r - 1) / r)
  local remaining = floor((full - diff) / u)
  if cost > cap then return 0, remaining, 0, ceil_div(diff, r) end
  local nxt = diff + cost * u
  if nxt > full then
    return 0, remaining, ceil_div(nxt - full, r), ceil_div(diff, r)
  end
  local reset = ceil_div(nxt, r)
  if commit then token_bucket_write(key, nxt, r, now, reset, tau) end
  return 1, floor((full - nxt) / u), 0, reset, nxt, r, now, reset, tau
end

-- Refund: put back the cost tokens a commit took (no more than refund_debt
-- gives back, from the commit's horizon less what refunds gave back since
-- it: see refund_since), clamped to the capacity, evaluated at now (the
-- commit's own time, at, right after it), so no refill is counted twice.
local function token_bucket_refund(key, cap, _, r, u, cost, at, reset, now, mark)
  now = now or at
  local full = cap * u
  local diff, exists, tau = tb_load(key, full, r, now)
  if not exists then return end
  local since, rec = refund_since(key, mark, at, reset)
  local give = refund_debt(cost * u, at, reset - since, now, r)
  refund_add(rec, ceil_div(give, r), now, floor((full + r - 1) / r))
  diff = diff - give
  if diff <= 0 then
    redis.call('DEL', key)
    return
  end
  token_bucket_write(key, diff, r, now, ceil_div(diff, r), tau)
end
