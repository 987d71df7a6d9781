-- Calendar quota: a fixed window whose windows are calendar periods (days,
-- ISO weeks, months, years) in a time zone, algorithm number 7. Lua knows
-- no time zones: the Go side sends, in place of period, r and u, the
-- boundaries of the calendar window around its own clock, [s0, s1), and of
-- the next one, [s1, s2). The window is the one holding now. A now outside
-- [s0, s2) (the server's clock and the Go side's disagree at a boundary) is
-- not decided: the entry point replies allowed 3 and the now, having
-- written nothing, and the Go side sends boundaries around that now.
--
-- State: the fixed window's hash {s = window start µs, e = window end µs,
-- c = count}, so that a key moving between an epoch-aligned fixed window
-- and a calendar quota reads as the fixed window reads a change of period.
-- A fixed window's string (its layout on the server's clock, see
-- fixed_window.lua) is read as a count from the current window until the
-- key expires, and the next write replaces it with the hash.
-- The count still counts while now < e and the stored window started in
-- the current window (or later): until e or the current window's end,
-- whichever comes first, or until e when the stored window starts at or
-- after the current window's end (the clock went back). A key is never
-- held beyond e (its TTL). See calendar in algorithms/internal/calc.

-- calendar_outside reports whether now is outside [s0, s2).
local function calendar_outside(now, s0, s2)
  return now < s0 or now >= s2
end

-- calendar_write stores count units in the window [start, stop); str says
-- the key holds a fixed window's string, which the hash replaces.
local function calendar_write(key, start, stop, count, now, str)
  if str then redis.call('DEL', key) end
  redis.call('HSET', key, 's', fmt(start), 'e', fmt(stop), 'c', fmt(count))
  pexpire(key, stop - now)
end

local function calendar(key, cap, s0, s1, s2, cost, now, commit)
  local start, stop = s0, s1
  if now >= s1 then start, stop = s1, s2 end
  local v = redis.pcall('HMGET', key, 's', 'e', 'c')
  local s, e, c, str
  if v.err then
    -- a fixed window's count on the server's clock (see fixed_window.lua):
    -- counted, as from the current window, until its key expires
    str = true
    c = tonumber(redis.call('GET', key))
    if not c then error('calendar quota key holds a string that is not a count') end
    local ttl = redis.call('PTTL', key)
    if ttl >= 0 then
      local t = redis.call('TIME')
      s, e = start, (tonumber(t[1]) * 1000 + floor(tonumber(t[2]) / 1000) + ttl + 1) * 1000
    end
  else
    s, e, c = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  end
  local count = 0
  if s and e and c and now < e and s >= start then
    count = c
    if s >= stop or e < stop then stop = e end
    start = s
  end
  local reset = 0
  if count > 0 then reset = stop - now end
  if cost > cap then return 0, cap - count, 0, reset end
  if count + cost > cap then return 0, cap - count, stop - now, reset end
  count = count + cost
  if commit then calendar_write(key, start, stop, count, now, str) end
  return 1, cap - count, 0, stop - now, start, stop, count, now, str
end

-- Refund, as fixed_window_refund: the commit at at replied reset = end -
-- at, which names its window by its end.
local function calendar_refund(key, _, _, _, _, cost, at, reset)
  local v = redis.pcall('HMGET', key, 'e', 'c')
  if v.err then return end -- a fixed window's string: another window
  local e, c = tonumber(v[1]), tonumber(v[2])
  if e ~= at + reset or not c then return end
  c = c - cost
  if c <= 0 then
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 'c', fmt(c))
  end
end
