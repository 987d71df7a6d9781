-- Sliding window counter, one check, the common case written flat: a key
-- that holds no state or windows stored under the same period, and a check
-- that passes or can never fit (a denial computes its retry_after in the
-- general code). sliding_window_fast makes sliding_window's decision with
-- the same float64 operations in the same order, as token_bucket_fast
-- does (token_bucket_one.lua). A key holding the current window with a
-- count expires at the window's start + 2 periods, whichever check of the
-- window wrote it last: on the server's clock (server, as in
-- fixed_window_one.lua) a check that adds to that count writes only the
-- count and leaves the TTL.
local sw_b, sw_cap, sw_period, sw_cost -- its numbers at b (see token_bucket_one.lua)
local function sliding_window_fast(key, b, now, server)
  local v = redis.call('HMGET', key, 's', 'e', 'c', 'p', 'w')
  if b ~= sw_b then
    sw_b, sw_cap, sw_period, sw_cost = b, tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 4])
  end
  local period = sw_period
  local s, e, c, p = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
  if (not s and not tonumber(v[5])) or (s and e and c and p and e - s == period) then
    local floor = math.floor
    local cap, cost = sw_cap, sw_cost
    local start = floor(now / period) * period
    local cur, prev = 0, 0
    local held = false -- the key holds this window, with a count
    if s then
      if s > start then
        start, cur, prev, held = s, c, p, c > 0
      elseif s == start then
        cur, prev, held = c, p, c > 0
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
      if not pass then return 0, left, 0, reset end
      -- sliding_window_write(key, start, period, cur, prev, reset)
      if held and server then
        redis.call('HSET', key, 'c', string.format(intf, cur))
      else
        redis.call('HSET', key, 's', string.format(intf, start), 'e', string.format(intf, start + period),
          'c', string.format(intf, cur), 'p', string.format(intf, prev))
        redis.call('PEXPIRE', key, string.format(intf, floor((reset + 999) / 1000)))
      end
      return 1, left, 0, reset
    end
  end
end
