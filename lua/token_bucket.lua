-- Token bucket: hash {t = tokens in scaled units, ts = last refill µs}. One
-- token is u units; the bucket refills r units per µs, exactly. A denied
-- check writes nothing, so no accrued refill is ever lost; a clock that goes
-- back refills nothing.
local function token_bucket(key, cap, r, u, cost, now, commit)
  local v = redis.call('HMGET', key, 't', 'ts')
  local full = cap * u
  local tokens, last = tonumber(v[1]), tonumber(v[2])
  if tokens and last then
    if tokens > full then tokens = full end
  else
    tokens, last = full, now
  end
  local base = last
  if now > base then base = now end
  local elapsed = now - last
  if elapsed > 0 and tokens < full then
    if elapsed >= ceil_div(full - tokens, r) then
      tokens = full
    else
      tokens = tokens + elapsed * r
    end
  end
  local need = cost * u
  if cost > cap then
    return 0, floor(tokens / u), 0, base + ceil_div(full - tokens, r) - now
  end
  if tokens < need then
    return 0, floor(tokens / u), base + ceil_div(need - tokens, r) - now, base + ceil_div(full - tokens, r) - now
  end
  tokens = tokens - need
  local reset = base + ceil_div(full - tokens, r) - now
  if commit then
    redis.call('HSET', key, 't', fmt(tokens), 'ts', fmt(base))
    pexpire(key, reset)
  end
  return 1, floor(tokens / u), 0, reset
end
