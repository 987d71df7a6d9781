-- Calendar quota: a fixed window whose windows are calendar periods
-- (days, ISO weeks, months, years) in a time zone, algorithm number 7.
-- Its check is the fixed window's (window_decide, fixed_window.lua) in a
-- window it picks itself (calendar_window). algorithms/internal/calc/
-- calendar.go is the Go twin.

--@ formula calendar_window(s, e, c, str, now, s0, s1, s2) -> count, start, stop
-- the count that a key holding the window [s, e) with c units (with str,
-- a fixed window's string: its count c until its expiry e) still counts
-- at now, and the window [start, stop) a check at now writes to: the one
-- of [s0, s1) and [s1, s2) that holds now. The count still counts while
-- now < e and the stored window started in the current window (or later):
-- until e or the current window's end, whichever comes first, or until e
-- when the stored window starts at or after the current window's end (the
-- clock went back). A key is never held beyond e (its TTL). A string
-- counts as from the current window.
start, stop = s0, s1
if now >= s1 then start, stop = s1, s2 end
count = 0
local from = s
if str and e then from = start end
if from and e and c and now < e and from >= start then
  count = c
  if from >= stop or e < stop then stop = e end
  start = from
end
--@ end

--@ section functions
-- Calendar quota (calendar.lua): Lua knows no time zones: the Go side
-- sends, in place of period, r and u, the boundaries of the calendar
-- window around its own clock, [s0, s1), and of the next one, [s1, s2).
-- The window is the one holding now. A now outside [s0, s2) (the
-- server's clock and the Go side's disagree at a boundary) is not
-- decided: the entry point replies allowed 3 and the now, having written
-- nothing, and the Go side sends boundaries around that now.
--
-- State: the fixed window's hash {s = window start µs, e = window end µs,
-- c = count}, so that a key moving between an epoch-aligned fixed window
-- and a calendar quota reads as the fixed window reads a change of period.
-- A fixed window's string (its layout on the server's clock) is read as a
-- count from the current window until the key expires, and the next write
-- replaces it with the hash.

-- calendar_outside reports whether now is outside [s0, s2).
local function calendar_outside(now, s0, s2)
  return now < s0 or now >= s2
end

-- calendar_write stores count units in the window [start, stop); str says
-- the key holds a fixed window's string, which the hash replaces.
local function calendar_write(key, start, stop, count, now, str)
  if str then redis.call('DEL', key) end
  --@ inline local fw_hash_write(key, start, stop, count, now, false, false) -> _
end

local function calendar(key, cap, s0, s1, s2, cost, now, commit, server)
  local v = redis.pcall('HMGET', key, 's', 'e', 'c')
  local s, e, c, str
  if v.err then
    -- a fixed window's count on the server's clock (see fixed_window.lua):
    -- counted, as from the current window, until its key expires
    str = true
    c, e = fixed_window_string(key, redis.call('GET', key), now, server)
  else
    s, e, c = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  end
  --@ inline local calendar_window(s, e, c, str, now, s0, s1, s2) -> count, start, stop
  --@ inline local window_decide(count, stop, now, cap, cost) -> allowed, remaining, retry, reset, total
  if allowed == 1 and commit then calendar_write(key, start, stop, total, now, str) end
  return allowed, remaining, retry, reset, start, stop, total, now, str
end

-- Refund, as fixed_window_refund: the commit at at replied reset = end -
-- at, which names its window by its end.
local function calendar_refund(key, _, _, _, _, cost, at, reset)
  local v = redis.pcall('HMGET', key, 'e', 'c')
  if v.err then return end -- a fixed window's string: another window
  --@ inline local fw_hash_refund(key, tonumber(v[1]), tonumber(v[2]), at, reset, cost) -> _
end
--@ end

--@ section one
-- One calendar check (see one.lua): a now outside the windows sent is not
-- decided; the reply is allowed 3 and the now.
if calendar_outside(now, tonumber(ARGV[3]), tonumber(ARGV[5])) then
  return {3, 0, 0, 0, now}
end
--@ end
