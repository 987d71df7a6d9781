-- Batch: several one-check calls of one algorithm, queued behind the round
-- trips in flight, decided in one script, one call after another. The Go
-- side joins it as prelude, algorithm, a line naming the algorithm's
-- function `check`, then this file, as for one.lua.
--
-- KEYS[i]          the storage key of call i (one server: no markers)
-- ARGV[6(i-1)+1..] call i's ARGV of one.lua: now µs (0: the server clock),
--                  capacity, period µs, r, u, cost
--
-- Reply: for each call, six integers: 1 and call i's reply of one.lua
-- (allowed, remaining, retry_after µs, reset_after µs, now µs), or 0 and
-- five zeros when call i raised an error (a key of another type, state it
-- cannot read): the Go side then runs that call's one-check script alone,
-- which replies the error itself.
--
-- Each call is decided exactly as one.lua decides it: atomically (a script
-- runs alone), writing only when it is allowed, so a denied call charges
-- nothing and does not stop the calls after it. Calls on the server clock
-- share one TIME, read when the first of them is decided.
local t
local reply = {}
for i = 1, #KEYS do
  local o = 6 * (i - 1)
  local now = tonumber(ARGV[o + 1])
  if now == 0 then
    if not t then
      local tt = redis.call('TIME')
      t = tonumber(tt[1]) * 1000000 + tonumber(tt[2])
    end
    now = t
  end
  local ok, allowed, remaining, retry, reset = pcall(check, KEYS[i], tonumber(ARGV[o + 2]),
    tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5]), tonumber(ARGV[o + 6]), now, true)
  if ok then
    if remaining < 0 then remaining = 0 end
    reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5], reply[o + 6] = 1, allowed, remaining, retry, reset, now
  else
    reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4], reply[o + 5], reply[o + 6] = 0, 0, 0, 0, 0, 0
  end
end
return reply
