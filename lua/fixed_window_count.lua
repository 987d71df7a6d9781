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
