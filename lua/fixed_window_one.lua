-- Fixed window, one check, the common case written flat. On the server's
-- clock (server true) with a period of whole ms, the key is a string
-- whose TTL ends with its window (see fixed_window.lua): an existing key
-- is read with GET and PTTL, no clock, and an allowed check adds with
-- INCRBY, which keeps the TTL; no key starts a window, reading TIME if now
-- is nil. Its expiry is set with PXAT to the window's last ms: Redis keeps
-- a key while its clock in ms has not passed that ms, so exactly until the
-- window ends; reset_after is then the TTL + 1 ms, at most 1 ms over the
-- µs. A key that holds a hash (an older layout, a calendar quota's window,
-- a client clock's write) is left to the general code, which reads it and
-- rewrites it as a string. On a client's clock, the key holds a hash: a
-- key that holds no state, or a window stored under the same period (not a
-- calendar quota's window of the same length), is decided here as
-- fixed_window decides it, and the TTL is set again from the writer's now
-- (a TTL set by another client whose clock runs ahead would end the window
-- early). The function returns nothing, having written nothing, for what
-- it leaves to the general code.
local fw_b, fw_cap, fw_period, fw_cost -- its numbers at b (see token_bucket_one.lua)
local function fixed_window_fast(key, b, now, server)
  if b ~= fw_b then
    fw_b, fw_cap, fw_period, fw_cost = b, tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 4])
  end
  local period = fw_period
  if server and period % 1000 == 0 then
    local v = redis.pcall('GET', key)
    if type(v) == 'table' then return end -- a hash
    local cap, cost = fw_cap, fw_cost
    if v then
      local c = tonumber(v)
      if not c then return end
      local ttl = redis.call('PTTL', key)
      if ttl < 0 then return end
      local reset = (ttl + 1) * 1000
      local remaining = cap - c
      if remaining < 0 then remaining = 0 end
      if cost > cap then return 0, remaining, 0, reset end
      if c + cost > cap then return 0, remaining, reset, reset end
      -- the cost as sent, not a number to format again (see fixed_window_flat.lua)
      return 1, cap - redis.call('INCRBY', key, ARGV[b + 4]), 0, reset
    end
    if cost > cap then return 0, cap, 0, 0 end
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    local stop = (math.floor(now / period) + 1) * period
    redis.call('SET', key, string.format(intf, cost), 'PXAT', string.format(intf, stop / 1000 - 1))
    return 1, cap - cost, 0, stop - now
  end
  local v = redis.pcall('HMGET', key, 's', 'e', 'c', 'w')
  if v.err then return end -- a string: the general code
  if not now then
    -- the server's clock, for a period of no whole ms: read only now
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
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
