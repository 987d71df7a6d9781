-- Token bucket, one check, the common case written flat: no marker keys,
-- and a key that holds no state, or state written under the same refill r
-- at or before now whose debt is at most one full bucket. It makes
-- token_bucket's decision with its arithmetic, inline, and replies as
-- one.lua does; any other case falls through to the general script after
-- it, which reads the key again (nothing is written before). now.lua has
-- read now.
if not KEYS[2] then
  -- intf formats the integers written: '%d' (faster) where Lua's C long
  -- holds 2^53, else '%.0f'; both write an integer below 2^53 alike.
  local intf = string.format('%d', 9007199254740992) == '9007199254740992' and '%d' or '%.0f'
  local v = redis.call('HMGET', KEYS[1], 'm', 'r', 'ts')
  local m, rs, ts = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  local cap, r, u, cost = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  local full = cap * u
  local diff
  if not ts then
    diff = 0
  elseif m and rs == r and now >= ts then
    diff = 0
    if (now - ts) * r < m then diff = m - (now - ts) * r end
    if diff > full then diff = nil end
  end
  if diff then
    local floor = math.floor
    local remaining = floor((full - diff) / u)
    if cost > cap then return {0, remaining, 0, floor((diff + r - 1) / r), now} end
    local nxt = diff + cost * u
    if nxt > full then
      return {0, remaining, floor((nxt - full + r - 1) / r), floor((diff + r - 1) / r), now}
    end
    -- token_bucket_write(KEYS[1], nxt, r, now, reset)
    local reset = floor((nxt + r - 1) / r)
    redis.call('HSET', KEYS[1], 'm', string.format(intf, nxt), 'r', string.format(intf, r), 'ts', string.format(intf, now))
    redis.call('PEXPIRE', KEYS[1], string.format(intf, floor((reset + 999) / 1000)))
    remaining = floor((full - nxt) / u)
    if remaining < 0 then remaining = 0 end
    return {1, remaining, 0, reset, now}
  end
end
