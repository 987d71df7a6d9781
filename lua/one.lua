-- One check, the common case: a script of its own per algorithm, holding
-- only that algorithm, which the Go side joins as prelude, algorithm, a line
-- naming the algorithm's function `check`, then this file.
--
-- KEYS[1]    the storage key
-- ARGV[1]    now in µs; 0 means the Redis server clock (TIME)
-- ARGV[2..6] capacity, period µs, r, u, cost (as one check of dispatch.lua)
--
-- Reply: allowed (0/1), remaining, retry_after µs, reset_after µs, now µs.
--
-- A check writes only when it is allowed, so one pass that commits is
-- dispatch.lua's two phases for one check.
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local allowed, remaining, retry, reset = check(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), now, true)
if remaining < 0 then remaining = 0 end
return {allowed, remaining, retry, reset, now}
