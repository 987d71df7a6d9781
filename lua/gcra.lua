-- GCRA: one string, the theoretical arrival time TAT = a + b/r µs (b < r),
-- so the emission interval u/r µs is exact. It is "<a>" when b is 0, as it
-- always is when the interval is a whole number of µs, else "<a>:<b>".
-- diff = TAT - now in scaled units; a check of cost n passes when
-- diff + n*u <= cap*u. This is the hot path of the common case, written
-- flat: every function call costs in Redis.

-- gcra_tat parses a stored TAT into (a, b); nil if it is not one.
local function gcra_tat(v)
  local a = tonumber(v)
  if a then return a, 0 end
  local sa, sb = string.match(v, '^(%d+):(%d+)$')
  return tonumber(sa), tonumber(sb)
end

-- gcra_bound bounds TAT - now = d µs to keep diff + cost*u and cap*u below
-- 2^53, and returns diff, the same in scaled units.
local function gcra_bound(d, b, r)
  local dmax = floor(4503599627370496 / r) -- 2^52 / r
  if d > dmax then d = dmax end
  return d * r + b
end

-- gcra_write stores the TAT now + diff/r µs, to expire when it is reached.
local function gcra_write(key, diff, r, now)
  local a, b = fmt(now + floor(diff / r)), diff % r
  if b ~= 0 then a = a .. ':' .. fmt(b) end
  redis.call('SET', key, a, 'PX', fmt(floor((floor((diff + r - 1) / r) + 999) / 1000)))
end

local function gcra(key, cap, _, r, u, cost, now, commit)
  -- diff: 0 for no state or a TAT in the past (a full bucket)
  local diff = 0
  local v = redis.call('GET', key)
  if v then
    local a, b = tonumber(v), 0
    if not a then a, b = gcra_tat(v) end
    if a and b and a >= now then diff = gcra_bound(a - now, b, r) end
  end
  local full = cap * u
  local remaining = 0
  if full > diff then remaining = floor((full - diff) / u) end
  local nxt = diff + cost * u
  if cost > cap then return 0, remaining, 0, floor((diff + r - 1) / r) end
  if nxt > full then return 0, remaining, floor((nxt - full + r - 1) / r), floor((diff + r - 1) / r) end
  if commit then gcra_write(key, nxt, r, now) end
  return 1, floor((full - nxt) / u), 0, floor((nxt + r - 1) / r), nxt, r, now
end

-- Refund (Cluster compensation): move the TAT back by the cost's emission
-- time, not below now (the commit's now). A TAT at or before now is a full
-- bucket: the key is deleted.
local function gcra_refund(key, _, _, r, u, cost, now)
  local v = redis.call('GET', key)
  if not v then return end
  local a, b = gcra_tat(v)
  if not (a and b) or a < now then return end
  local diff = gcra_bound(a - now, b, r) - cost * u
  if diff <= 0 then
    redis.call('DEL', key)
    return
  end
  gcra_write(key, diff, r, now)
end
