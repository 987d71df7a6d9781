-- Fixed window, one check, the common case written flat: a key that holds
-- no state, or a window stored under the same period (not a calendar
-- quota's window of the same length). fixed_window_fast
-- makes fixed_window's decision as token_bucket_fast does
-- (token_bucket_one.lua). server is true when now is the server's clock,
-- the clock of TTLs: a write to the window the key holds then leaves its
-- TTL, which already ends with the window. On a client's clock every
-- write sets the TTL again, measured from the writer's now: a TTL set by
-- another client whose clock runs ahead would end the window early.
local fw_b, fw_cap, fw_period, fw_cost -- its numbers at b (see token_bucket_one.lua)
local function fixed_window_fast(key, b, now, server)
  local v = redis.call('HMGET', key, 's', 'e', 'c', 'w')
  if b ~= fw_b then
    fw_b, fw_cap, fw_period, fw_cost = b, tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 4])
  end
  local period = fw_period
  local s, e, c = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  if (not s and not tonumber(v[4])) or (s and e and c and e - s == period and s % period == 0) then
    local cap, cost = fw_cap, fw_cost
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
    if cost > cap then return 0, remaining, 0, reset end
    if count + cost > cap then return 0, remaining, stop - now, reset end
    count = count + cost
    -- fixed_window_write(key, start, stop, count, now); a window
    -- already stored keeps its start and end, and on the server's clock
    -- its TTL
    if same then
      redis.call('HSET', key, 'c', string.format(intf, count))
    else
      redis.call('HSET', key, 's', string.format(intf, start), 'e', string.format(intf, stop), 'c', string.format(intf, count))
    end
    if not (same and server) then
      redis.call('PEXPIRE', key, string.format(intf, math.floor((stop - now + 999) / 1000)))
    end
    return 1, cap - count, 0, stop - now
  end
end
