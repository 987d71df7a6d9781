-- Fixed window, one check, the common case written flat: no marker keys,
-- and a key that holds no state, or a window stored under the same
-- period. It makes fixed_window's decision with its arithmetic, inline,
-- and replies as one.lua does; any other case falls through to the
-- general script after it, which reads the key again (nothing is written
-- before). now.lua has read now.
if not KEYS[2] then
  -- intf formats the integers written: '%d' (faster) where Lua's C long
  -- holds 2^53, else '%.0f'; both write an integer below 2^53 alike.
  local intf = string.format('%d', 9007199254740992) == '9007199254740992' and '%d' or '%.0f'
  local v = redis.call('HMGET', KEYS[1], 's', 'e', 'c', 'w')
  local period = tonumber(ARGV[3])
  local s, e, c = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  if (not s and not tonumber(v[4])) or (s and e and c and e - s == period) then
    local cap, cost = tonumber(ARGV[2]), tonumber(ARGV[6])
    local start = math.floor(now / period) * period
    local stop = start + period
    local count = 0
    local same = false
    if s and now < e and s >= start then
      -- the current window, or a later one: the clock went back
      count, start, stop, same = c, s, e, true
    end
    local reset = 0
    if count > 0 then reset = stop - now end
    local remaining = cap - count
    if remaining < 0 then remaining = 0 end
    if cost > cap then return {0, remaining, 0, reset, now} end
    if count + cost > cap then return {0, remaining, stop - now, reset, now} end
    count = count + cost
    -- fixed_window_write(KEYS[1], start, stop, count, now); a window
    -- already stored keeps its start and end
    if same then
      redis.call('HSET', KEYS[1], 'c', string.format(intf, count))
    else
      redis.call('HSET', KEYS[1], 's', string.format(intf, start), 'e', string.format(intf, stop), 'c', string.format(intf, count))
    end
    redis.call('PEXPIRE', KEYS[1], string.format(intf, math.floor((stop - now + 999) / 1000)))
    return {1, cap - count, 0, stop - now, now}
  end
end
