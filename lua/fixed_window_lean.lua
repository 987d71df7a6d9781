-- The fixed window's lean script: one check on the server's clock, no
-- marker keys, a period of whole ms and a cost no larger than the
-- capacity (the Go side sends it only then), decided as
-- fixed_window_flat.lua decides it, with only the numbers that path reads:
-- every ARGV a script is sent costs Redis about as much as a command
-- (parsing it, a Lua string, a slot of ARGV), and the one-check script's
-- other four (now, r, u and, most often, a cost of 1) go unread there.
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
-- and the cost. An empty reply leaves the check, undecided and with
-- nothing written, to the algorithm's one-check script (a key that holds
-- a hash: an older layout, a calendar quota's window, a client clock's
-- write; a string with no TTL that was there before).
local key, cost = KEYS[1], ARGV[3] or '1'
local c = redis.pcall('INCRBY', key, cost)
if type(c) ~= 'number' then return {} end
local ttl = redis.call('PTTL', key)
if ttl >= 0 then
  if c > tonumber(ARGV[1]) then redis.call('DECRBY', key, cost) end
  return {c, (ttl + 1) * 1000}
end
if c == tonumber(cost) then
  -- INCRBY created it: a window starts, and ends at its period's end
  local period = tonumber(ARGV[2])
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local stop = (math.floor(now / period) + 1) * period
  -- a number: redis.call writes it with %.17g, exact below 2^53, for
  -- about 1,000 instructions less than string.format('%.0f') and its
  -- Lua string
  redis.call('PEXPIREAT', key, stop / 1000 - 1)
  return {c, stop - now}
end
redis.call('DECRBY', key, cost)
return {}
