-- GCRA's lean script: one check on the server's clock, no marker keys,
-- for a limit whose emission interval is a whole number of µs (r = 1, so
-- that every TAT stored under it is a whole µs: see gcra.lua), decided as
-- gcra_one.lua decides it, with only the numbers that path reads (see
-- fixed_window_lean.lua for why) and the stored value's suffix computed
-- once on the Go side rather than formatted on every call.
--
-- KEYS[1]   the storage key (see gcra.lua)
-- ARGV[1]   capacity (the burst)
-- ARGV[2]   u, the emission interval in µs (see calc.Params; r is 1)
-- ARGV[3]   the stored value's suffix: '/' .. tau, tau = capacity * u
-- ARGV[4]   the cost, when it is not 1
--
-- Reply: allowed (0 or 1), remaining, retry_after µs, reset_after µs, as
-- one.lua's fast paths reply; or an empty reply, having written nothing,
-- for a value gcra_one.lua leaves to the general code (another limit's,
-- or not a TAT), which the algorithm's one-check script then decides.
local intf = string.format('%d', 9007199254740992) == '9007199254740992' and '%d' or '%.0f'
local floor = math.floor
local key, sfx = KEYS[1], ARGV[3]
local v = redis.call('GET', key)
local a
if v then
  if string.sub(v, -#sfx) ~= sfx then return {} end
  a = tonumber(string.sub(v, 1, -#sfx - 1))
  if not a then return {} end
end
local cap, u = tonumber(ARGV[1]), tonumber(ARGV[2])
local cost = 1
if ARGV[4] then cost = tonumber(ARGV[4]) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local full = cap * u
local diff = 0
if a and a >= now then diff = a - now end
-- more than full: the clock went back; never cut under the same limit
local remaining = floor((full - diff) / u)
if remaining < 0 then remaining = 0 end
if cost > cap then return {0, remaining, 0, diff} end
local nxt = diff + cost * u
if nxt > full then return {0, remaining, nxt - full, diff} end
redis.call('SET', key, string.format(intf, now + nxt) .. sfx, 'PX', string.format(intf, floor((nxt + 999) / 1000)))
return {1, floor((full - nxt) / u), 0, nxt}
