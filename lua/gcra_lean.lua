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
