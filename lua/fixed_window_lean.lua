-- The fixed window's lean script: one check on the server's clock, no
-- marker keys, a period of whole ms and a cost no larger than the
-- capacity (the Go side sends it only then), decided by
-- fixed_window_count.lua, which follows, as the one-check script decides
-- it, with only the numbers that needs: every ARGV a script is sent costs
-- Redis about as much as a command (parsing it, a Lua string, a slot of
-- ARGV), and the one-check script's other four (now, r, u and, most
-- often, a cost of 1) go unread there.
--
-- KEYS[1]   the storage key (see fixed_window.lua)
-- ARGV[1]   capacity
-- ARGV[2]   period in µs, a whole number of ms
-- ARGV[3]   the cost, when it is not 1
--
-- Reply: {count, reset_after µs}: count is the key's count with this
-- check's cost added, and the check is allowed if and only if it is at
-- most the capacity (a denial took its units back: a denied check
-- consumes nothing); the Go side makes the Result from it, the capacity
-- and the cost. An empty reply (the two lines the Go side joins after
-- fixed_window_count.lua) leaves the check, undecided and with nothing
-- written, to the algorithm's one-check script (a key that holds a hash:
-- an older layout, a calendar quota's window, a client clock's write; a
-- string with no TTL that was there before).
local key, cap, period, cost, ncost = KEYS[1], ARGV[1], ARGV[2], '1', 1
if ARGV[3] then cost, ncost = ARGV[3], tonumber(ARGV[3]) end
local count, reset
