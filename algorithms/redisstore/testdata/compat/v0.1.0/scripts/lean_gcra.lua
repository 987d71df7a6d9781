-- lean_gcra.lua: generated from the sources in lua/ by
-- go test ./lua -run TestScriptFiles -update; do not edit.
--
-- Decides one gcra check on the server's clock with no marker keys, for a
-- limit whose emission interval is a whole number of µs, as one_gcra decides it,
-- sent with only the numbers its flat path reads.
--
-- KEYS:
--   KEYS[1]  the storage key
-- ARGV:
--   ARGV[1]  capacity (burst)
--   ARGV[2]  u: the emission interval in µs
--   ARGV[3]  the stored value's suffix, '/' .. capacity*u
--   ARGV[4]  cost, when it is not 1
-- Reply:
--   allowed (0 or 1), remaining, retry_after µs, reset_after µs;
--   empty, nothing written, for a value one_gcra decides
--
-- SHA1 368c0f49e34e28c47f8a3d36135403e71b7948e0 (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from, in order: gcra_lean.lua, gcra_flat.lua,
-- joined with the glue lines of lua.go. The sources' headers say more.
-- ---- the script, as sent ----
-- GCRA's lean script: one check on the server's clock, no marker keys,
-- for a limit whose emission interval is a whole number of µs (r = 1, so
-- that every TAT stored under it is a whole µs: see gcra.lua), decided by
-- gcra_flat.lua, which follows, as the one-check script decides it, with
-- only the numbers it needs (see fixed_window_lean.lua for why) and the
-- stored value's suffix computed once on the Go side rather than formatted
-- on every call.
--
-- KEYS[1]   the storage key (see gcra.lua)
-- ARGV[1]   capacity (the burst)
-- ARGV[2]   u, the emission interval in µs (see calc.Params; r is 1)
-- ARGV[3]   the stored value's suffix: '/' .. tau, tau = capacity * u
-- ARGV[4]   the cost, when it is not 1
--
-- Reply: allowed (0 or 1), remaining, retry_after µs, reset_after µs, as
-- one.lua's fast paths reply; or an empty reply (the line the Go side
-- joins after gcra_flat.lua), having written nothing, for a value
-- gcra_flat.lua leaves to the general code (another limit's, or not a
-- TAT), which the algorithm's one-check script then decides.
local floor = math.floor
local key, cap, r, u, sfx, up = KEYS[1], tonumber(ARGV[1]), 1, tonumber(ARGV[2]), ARGV[3], 999
local cost = 1
if ARGV[4] then cost = tonumber(ARGV[4]) end
local now
-- GCRA, one check, the common case, written once for the two scripts that
-- start with it: the one-check script (gcra_one.lua before it, which
-- closes its block after it) and the lean script (gcra_lean.lua before
-- it). They declare key, cap, r, u, cost (numbers), sfx (the suffix of a
-- value written under this limit, '/' .. tau: see gcra.lua), up (µs added
-- to reset_after before the TTL is rounded down to the ms: 999 on the
-- server's clock, 1000999 on another, whose key lives bucket_ttl's
-- expiry_margin of 1000 ms longer: see prelude.lua), floor, now (nil:
-- read from TIME here, once the value is known to be decided here).
-- A value that is absent or a whole µs written
-- under this limit is decided with gcra's arithmetic, inline, and replied
-- as one.lua's fast paths reply (without the now: the Go side needs it
-- only from calls with marker keys; each value replied costs); any other
-- value is left, nothing written, to what follows.
local v = redis.call('GET', key)
local a
if v and string.sub(v, -#sfx) == sfx then a = tonumber(string.sub(v, 1, -#sfx - 1)) end
if not v or a then
  if not now then
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
  end
  local full = cap * u
  local diff = 0
  if a and a >= now then diff = (a - now) * r end
  -- more than full: the clock went back; never cut under the same limit
  local remaining = floor((full - diff) / u)
  if remaining < 0 then remaining = 0 end
  if cost > cap then return {0, remaining, 0, floor((diff + r - 1) / r)} end
  local nxt = diff + cost * u
  if nxt > full then
    return {0, remaining, floor((nxt - full + r - 1) / r), floor((diff + r - 1) / r)}
  end
  -- gcra_write(key, nxt, r, now, tau), its integers written with '%d'
  -- where the TAT's length proves it exact (a µs on the server's clock
  -- has 16 digits; see lua/doc.go), else with '%.0f'
  local f, at, b = '%d', now + floor(nxt / r), nxt % r
  local tat = string.format(f, at)
  if #tat < 12 then
    f = '%.0f'
    tat = string.format(f, at)
  end
  if b ~= 0 then tat = tat .. ':' .. string.format(f, b) .. ':' .. string.format(f, r) end
  local reset = floor((nxt + r - 1) / r)
  redis.call('SET', key, tat .. sfx, 'PX', string.format(f, floor((reset + up) / 1000)))
  remaining = floor((full - nxt) / u)
  if remaining < 0 then remaining = 0 end
  return {1, remaining, 0, reset}
end
return {}
