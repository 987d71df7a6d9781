-- The fixed window's one-check script starts here: a check on the
-- server's clock with a period of whole ms, not a part of a call spanning
-- slots (KEYS[3]), and whose cost can fit, is decided flat, before any
-- function is defined, with the commands ulule/limiter's counter needs:
-- INCRBY then PTTL. The key is a string whose TTL ends with its window
-- (see fixed_window.lua): a key with a TTL is the current window, and the
-- check reads no clock. A denial takes its units back (DECRBY): a denied
-- check consumes nothing. A key INCRBY created (no TTL, count = cost)
-- starts a window: TIME, and its expiry at the window's last ms (PEXPIREAT,
-- as fixed_window_fast sets it). Anything else (a hash: INCRBY fails; a
-- string with no TTL that was there before) is left, unchanged, to what
-- follows: fixed_window_fast, then the general code. See one.lua for KEYS,
-- ARGV and the reply, which leaves out the now, as one_fast.lua's.
-- fixed_window_lean.lua decides the same checks alike on ARGV of its own
-- (TestLeanScripts holds the two together).
-- INCRBY and DECRBY get the cost as sent (ARGV[6], an integer string):
-- a Lua number would be formatted again on every call (0.2 µs of the
-- script's 2.9 in BenchmarkScripts).
if ARGV[1] == '0' and not KEYS[3] then
  local key, cap, period, cost = KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[6])
  if cost <= cap and period % 1000 == 0 then
    local c = redis.pcall('INCRBY', key, ARGV[6])
    if type(c) == 'number' then
      local ttl = redis.call('PTTL', key)
      if ttl >= 0 then
        local reset = (ttl + 1) * 1000
        if c <= cap then return {1, cap - c, 0, reset} end
        redis.call('DECRBY', key, ARGV[6])
        local allowed = 0
        if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then allowed = 2 end
        local remaining = cap - c + cost
        if remaining < 0 then remaining = 0 end
        return {allowed, remaining, reset, reset}
      end
      if c == cost then
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
        local stop = (math.floor(now / period) + 1) * period
        redis.call('PEXPIREAT', key, string.format('%.0f', stop / 1000 - 1))
        return {1, cap - c, 0, stop - now}
      end
      redis.call('DECRBY', key, ARGV[6])
    end
  end
end
