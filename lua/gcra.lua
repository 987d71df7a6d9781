-- GCRA: one string "<a>:<b>", the theoretical arrival time TAT = a + b/r µs
-- (b < r), so the emission interval u/r µs is exact. diff = TAT - now in
-- scaled units; a check of cost n passes when diff + n*u <= cap*u.
local function gcra(key, cap, r, u, cost, now, commit)
  local v = redis.call('GET', key)
  local a, f = now, 0
  if v then
    local sa, sf = string.match(v, '^(%d+):(%d+)$')
    sa, sf = tonumber(sa), tonumber(sf)
    if sa and sf and sa >= now then a, f = sa, sf end
  end
  local full = cap * u
  local d = a - now
  local dmax = floor(4503599627370496 / r) -- 2^52 / r
  if d > dmax then d = dmax end
  local diff = d * r + f
  local remaining = 0
  if full > diff then remaining = floor((full - diff) / u) end
  local nxt = diff + cost * u
  if cost > cap then return 0, remaining, 0, ceil_div(diff, r) end
  if nxt > full then return 0, remaining, ceil_div(nxt - full, r), ceil_div(diff, r) end
  local reset = ceil_div(nxt, r)
  if commit then
    redis.call('SET', key, fmt(now + floor(nxt / r)) .. ':' .. fmt(nxt % r), 'PX', fmt(ceil_div(reset, 1000)))
  end
  return 1, floor((full - nxt) / u), 0, reset
end

-- Refund (Cluster compensation): move the TAT back by the cost's emission
-- time, not below now (the commit's now). A TAT at or before now is a full
-- bucket: the key is deleted.
local function gcra_refund(key, cap, r, u, cost, now)
  local v = redis.call('GET', key)
  if not v then return end
  local a, f = string.match(v, '^(%d+):(%d+)$')
  a, f = tonumber(a), tonumber(f)
  if not (a and f) or a < now then return end
  local d = a - now
  local dmax = floor(4503599627370496 / r) -- 2^52 / r, as in gcra
  if d > dmax then d = dmax end
  local diff = d * r + f - cost * u
  if diff <= 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('SET', key, fmt(now + floor(diff / r)) .. ':' .. fmt(diff % r), 'PX', fmt(ceil_div(ceil_div(diff, r), 1000)))
end
