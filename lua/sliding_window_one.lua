-- Sliding window counter, one check, the common case written flat: no
-- marker keys, a key that holds no state or windows stored under the same
-- period, and a check that passes or can never fit. It makes
-- sliding_window's decision with the same float64 operations in the same
-- order, inline, and replies as one.lua does; any other case (a denial
-- that must compute its retry_after) falls through to the general script
-- after it, which reads the key again (nothing is written before).
-- now.lua has read now.
if not KEYS[2] then
  -- intf formats the integers written: '%d' (faster) where Lua's C long
  -- holds 2^53, else '%.0f'; both write an integer below 2^53 alike.
  local intf = string.format('%d', 9007199254740992) == '9007199254740992' and '%d' or '%.0f'
  local v = redis.call('HMGET', KEYS[1], 's', 'e', 'c', 'p', 'w')
  local period = tonumber(ARGV[3])
  local s, e, c, p = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
  if (not s and not tonumber(v[5])) or (s and e and c and p and e - s == period) then
    local floor = math.floor
    local cap, cost = tonumber(ARGV[2]), tonumber(ARGV[6])
    local start = floor(now / period) * period
    local cur, prev = 0, 0
    if s then
      if s > start then
        start, cur, prev = s, c, p
      elseif s == start then
        cur, prev = c, p
      elseif s == start - period then
        prev = c
      end
    end
    local x = now - start
    if x < 0 then x = 0 end
    local est = prev * (period - x) / period
    local pass = cost <= cap and est + (cur + cost) <= cap
    if pass or cost > cap then
      if pass then cur = cur + cost end
      local left = cap - est - cur
      if left >= 0 then left = floor(left) else left = -floor(-left) end
      if left < 0 then left = 0 end
      local reset = 0
      if cur > 0 then
        reset = start + 2 * period - now
      elseif prev > 0 then
        reset = start + period - now
      end
      if reset < 0 then reset = 0 end
      if not pass then return {0, left, 0, reset, now} end
      -- sliding_window_write(KEYS[1], start, period, cur, prev, reset)
      redis.call('HSET', KEYS[1], 's', string.format(intf, start), 'e', string.format(intf, start + period),
        'c', string.format(intf, cur), 'p', string.format(intf, prev))
      redis.call('PEXPIRE', KEYS[1], string.format(intf, floor((reset + 999) / 1000)))
      return {1, left, 0, reset, now}
    end
  end
end
