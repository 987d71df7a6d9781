-- Token bucket: hash {t = tokens in scaled units, ts = last refill µs}. One
-- token is u units; the bucket refills r units per µs, exactly. A denied
-- check writes nothing, so no accrued refill is ever lost; a clock that goes
-- back refills nothing.

-- tb_load returns the tokens refilled up to now, the refill base
-- max(ts, now), and whether the key holds state.
local function tb_load(key, full, r, now)
  local v = redis.call('HMGET', key, 't', 'ts')
  local tokens, last = tonumber(v[1]), tonumber(v[2])
  local exists = tokens ~= nil and last ~= nil
  if exists then
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
  return tokens, base, exists
end

-- token_bucket_write stores tokens refilled up to base, full in reset µs.
local function token_bucket_write(key, tokens, base, reset)
  redis.call('HSET', key, 't', fmt(tokens), 'ts', fmt(base))
  pexpire(key, reset)
end

local function token_bucket(key, cap, _, r, u, cost, now, commit)
  local full = cap * u
  local tokens, base = tb_load(key, full, r, now)
  local need = cost * u
  if cost > cap then
    return 0, floor(tokens / u), 0, base + ceil_div(full - tokens, r) - now
  end
  if tokens < need then
    return 0, floor(tokens / u), base + ceil_div(need - tokens, r) - now, base + ceil_div(full - tokens, r) - now
  end
  tokens = tokens - need
  local reset = base + ceil_div(full - tokens, r) - now
  if commit then token_bucket_write(key, tokens, base, reset) end
  return 1, floor(tokens / u), 0, reset, tokens, base, reset
end

-- Refund (Cluster compensation): put back the cost tokens a commit at now
-- took, clamped to the capacity. Evaluated at the commit's now, so no refill
-- is counted twice.
local function token_bucket_refund(key, cap, _, r, u, cost, now)
  local full = cap * u
  local tokens, base, exists = tb_load(key, full, r, now)
  if not exists then return end
  tokens = tokens + cost * u
  if tokens > full then tokens = full end
  local reset = base + ceil_div(full - tokens, r) - now
  if reset <= 0 then
    redis.call('DEL', key)
    return
  end
  token_bucket_write(key, tokens, base, reset)
end
