-- lean_fixed_window.lua: generated from the sources in lua/ by
-- go test ./lua -run TestScriptFiles -update; do not edit.
--
-- Decides one fixed_window check on the server's clock with no marker
-- keys, a period of whole ms and a cost within the capacity, as one_fixed_window
-- decides it, sent with only the numbers its flat path reads.
--
-- KEYS:
--   KEYS[1]  the storage key
-- ARGV:
--   ARGV[1]  capacity
--   ARGV[2]  period µs (whole ms)
--   ARGV[3]  cost, when it is not 1
-- Reply:
--   {count, reset_after µs}: the key's count with the cost added (allowed
--   if and only if it is at most the capacity; a denial took the cost back);
--   empty, nothing written, for a state one_fixed_window decides
--
-- SHA1 6d0bf48c17ce2acdcbfd91c67db9996cb060316b (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from, in order: fixed_window_lean.lua, fixed_window_count.lua,
-- joined with the glue lines of lua.go. The sources' headers say more.
-- ---- the script, as sent ----
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
-- The fixed window's common case on the server's clock, written once for
-- the two scripts that start with it: the one-check script
-- (fixed_window_flat.lua before it, fixed_window_flat_end.lua after) and
-- the lean script (fixed_window_lean.lua before it). They declare key, cap
-- (a number, or the lean script's ARGV, read only when a key's window is
-- current), period (µs, a whole number of ms), cost (as sent: an integer
-- string, which INCRBY and DECRBY get without formatting a Lua number
-- again) and ncost (the cost as a number), and the locals count and reset, which this sets for a check it
-- decides: the key's count with the cost added (allowed if and only if it
-- is at most cap; a denial took its units back with DECRBY, so a denied
-- check consumes nothing) and reset_after in µs. The key is a string whose
-- TTL ends with its window (see fixed_window.lua): a key with a TTL is the
-- current window, and the check reads no clock. A key INCRBY created (no
-- TTL, count = cost) starts a window: TIME, and its expiry at the
-- window's last ms (PEXPIREAT, as fixed_window_fast sets it), with NX
-- (Redis 7), so that a window refunds emptied (count = cost again, its
-- TTL kept) keeps its own end, which PTTL then reads; that costs a new
-- key no PTTL. Redis 6 refuses NX: PTTL tells the two apart. Anything
-- else (a hash: INCRBY fails; a string with no TTL that was there before)
-- is left unchanged, count nil, to what follows.
local c = redis.pcall('INCRBY', key, cost)
if type(c) == 'number' then
  local set, now, stop = 0
  if c == ncost then
    -- the period read once: an ARGV string is parsed at each use
    local t, p = redis.call('TIME'), period + 0
    now = t[1] * 1000000 + t[2]
    stop = now - now % p + p
    -- the window's last ms, with '%d' where its length proves it exact
    -- (a ms on the server's clock has 13 digits; see lua/doc.go)
    local ms = stop / 1000 - 1
    local last = string.format('%d', ms)
    if #last < 12 then last = string.format('%.0f', ms) end
    set = redis.pcall('PEXPIREAT', key, last, 'NX')
  end
  if set == 1 then
    count, reset = c, stop - now
  else
    local ttl = redis.call('PTTL', key)
    if ttl >= 0 then
      if c > tonumber(cap) then redis.call('DECRBY', key, cost) end
      count, reset = c, (ttl + 1) * 1000
    elseif c == ncost then
      -- Redis 6: no TTL, so a window starts
      redis.call('PEXPIREAT', key, stop / 1000 - 1)
      count, reset = c, stop - now
    else
      redis.call('DECRBY', key, cost)
    end
  end
end
if count then return {count, reset} end
return {}
