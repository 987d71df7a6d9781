-- Sliding window counter: its arithmetic (the formulas) and the code each
-- script holds (the sections after them). algorithms/internal/calc/
-- sliding_window.go is the Go twin: the estimate is computed with the
-- same float64 operations, in the same order, so both agree bit for bit.
--
-- State: hash {s = start µs of the stored window, e = its end µs, c =
-- count in it, p = count in the window before}. The estimate at elapsed x
-- into the current window is prev*(period-x)/period + cur. Start and end
-- are instants, so they mean the same under any limit. Under an unchanged
-- period (e - s) the stored window is the current one, the previous one,
-- or older. When the period changed, each stored window's count goes to
-- the window of the new period in which that stored window started (the
-- current one, the previous one, or none), and the stored counts are
-- forgotten when the key would have expired (e, plus the old period if c
-- > 0): no claim goes beyond that. Under an unchanged period, a window
-- that starts in the future (the clock went back) is held. State written
-- before windows were stored as instants, {w = window index, c, p}, is
-- read as windows of the current period.

--@ formula sw_window(s, e, c, p, stored, now, period) -> start, cur, prev, held, life
-- the current window (its start) and its count and the previous one's,
-- of a key that holds the window [s, e) with c units and p before it (s
-- nil: no state; stored: s and e are stored as such, not the older form),
-- at now under period; held says the key holds the current window with a
-- count, and life is the instant the stored counts are forgotten after a
-- change of period (-1: no such instant before the key's own TTL)
local _
--@ inline window_end(now, period) -> start, _
cur, prev, held, life = 0, 0, false, -1
if s then
  local old = e - s
  if old == period and s > start then
    start, cur, prev, held = s, c, p, stored and c > 0
  elseif old == period then
    if s == start then
      cur, prev, held = c, p, stored and c > 0
    elseif s == start - period then
      prev = c
    end
  else
    life = e
    if c > 0 then life = life + old end
    if now < life then
      -- each stored window's count to the window it started in
      for _, w in ipairs({{s, c}, {s - old, p}}) do
        if w[1] >= start then
          cur = cur + w[2]
        elseif w[1] >= start - period then
          prev = prev + w[2]
        end
      end
    end
  end
end
--@ end

--@ formula sw_estimate(prev, period, x) -> est
-- the previous window's weight at elapsed x into the current one
est = prev * (period - x) / period
--@ end

--@ formula sw_pass(prev, cur, cost, cap, period, x) -> pass
--@ inline local sw_estimate(prev, period, x) -> est
pass = est + (cur + cost) <= cap
--@ end

--@ formula sw_trunc(x) -> n
-- x rounded toward zero
if x >= 0 then n = floor(x) else n = -floor(-x) end
--@ end

--@ formula sw_reset(start, period, now, cur, prev, life) -> reset
-- reset_after at now of a key whose current window starts at start with
-- cur units, prev in the window before: no later than life, the instant
-- its counts are forgotten, when life is not -1; never below 0
reset = 0
if cur > 0 then
  reset = start + 2 * period - now
elseif prev > 0 then
  reset = start + period - now
end
if life >= 0 and reset > life - now then reset = life - now end
if reset < 0 then reset = 0 end
--@ end

--@ formula sw_decide(start, cur, prev, now, period, cap, cost, life) -> allowed, remaining, retry, reset, total
-- a check of cost units at now, in the current window that starts at
-- start with cur units, prev in the one before (life: see sw_window):
-- allowed (1/0), remaining (below 0 after the estimate passed the
-- capacity: callers clamp), retry_after µs (the first instant the check
-- passes with no other traffic: later in this window as the previous
-- window's weight fades, or in the next, where cur becomes the previous
-- count), reset_after µs, and the current count it leaves, total
local x = now - start
if x < 0 then x = 0 end
--@ inline local sw_estimate(prev, period, x) -> est
--@ inline sw_trunc(cap - est - cur) -> remaining
--@ inline sw_reset(start, period, now, cur, prev, life) -> reset
allowed, retry, total = 0, 0, cur
if cost <= cap then
  --@ inline local sw_pass(prev, cur, cost, cap, period, x) -> pass
  if pass then
    allowed, total = 1, cur + cost
    --@ inline sw_trunc(cap - est - total) -> remaining
    --@ inline sw_reset(start, period, now, total, prev, -1) -> reset
  else
    local wp, wc, ws, we = prev, cur, start, x
    if cur + cost > cap then
      wp, wc, ws, we = cur, 0, start + period, 0
    end
    -- prev*(period-y)/period <= cap-cur-cost: a first guess by algebra,
    -- then corrected by the exact predicate (float rounding)
    local slack = cap - wc - cost
    --@ inline local sw_trunc(period - slack * period / wp) -> y
    if y < we then y = we end
    if y > period then y = period end
    while y < period do
      --@ inline local sw_pass(wp, wc, cost, cap, period, y) -> ok
      if ok then break end
      y = y + 1
    end
    while y > we do
      --@ inline local sw_pass(wp, wc, cost, cap, period, y - 1) -> ok
      if not ok then break end
      y = y - 1
    end
    retry = ws + y - now
    if life >= 0 and retry > life - now then retry = life - now end
    if retry < 0 then retry = 0 end
  end
end
--@ end

--@ formula sw_write(key, start, period, cur, prev, reset, held, server, f) -> done
-- stores the counts of the window [start, start + period) and the one
-- before, expiring in reset µs, integers formatted with f. When the key
-- holds that window with a count (held), it expires at start + 2 periods
-- already: on the server's clock only the count changes.
if held and server then
  redis.call('HSET', key, 'c', string.format(f, cur))
else
  redis.call('HSET', key, 's', string.format(f, start), 'e', string.format(f, start + period),
    'c', string.format(f, cur), 'p', string.format(f, prev))
  redis.call('PEXPIRE', key, string.format(f, floor((reset + 999) / 1000)))
end
done = true
--@ end

--@ section functions
-- Sliding window counter (sliding_window.lua): hash {s = start µs of the
-- stored window, e = its end µs, c = count in it, p = count in the window
-- before}.

-- sw_load returns the stored window's start, end, count and previous count,
-- or nil, and whether start and end are stored as such (not the older
-- form).
local function sw_load(key, period)
  local v = redis.call('HMGET', key, 's', 'e', 'c', 'p', 'w')
  local s, e, c, p = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
  local stored = s ~= nil
  if not s then
    local w = tonumber(v[5])
    if not w then return nil end
    s = w * period
    e = s + period
  end
  if not (e and c and p) then return nil end
  return s, e, c, p, stored
end

local function sliding_window_write(key, start, period, cur, prev, reset, held, server)
  --@ inline local sw_write(key, start, period, cur, prev, reset, held, server, '%.0f') -> _
end

local function sliding_window(key, cap, period, _, _, cost, now, commit, server)
  local s, e, c, p, stored = sw_load(key, period)
  --@ inline local sw_window(s, e, c, p, stored, now, period) -> start, cur, prev, held, life
  --@ inline local sw_decide(start, cur, prev, now, period, cap, cost, life) -> allowed, remaining, retry, reset, total
  if allowed == 1 and commit then sliding_window_write(key, start, period, total, prev, reset, held, server) end
  return allowed, remaining, retry, reset, start, period, total, prev, reset, held, server
end

-- Refund: take cost back from the window a commit at at added it to, named
-- by the commit's reply reset = start + 2*period - at. The units are the
-- current count while the key is still at that window, the previous count
-- once it has moved on to the next, and forgotten after that (or once the
-- period has changed); the key then lives as the state left needs at now.
local function sliding_window_refund(key, _, period, _, _, cost, at, reset, now)
  local start = at + reset - 2 * period
  local w, e, c, p = sw_load(key, period)
  if not w or e - w ~= period then return end
  if w == start then
    c = c - cost
    if c < 0 then c = 0 end
  elseif w == start + period then
    p = p - cost
    if p < 0 then p = 0 end
  else
    return
  end
  --@ inline local sw_reset(w, period, now, c, p, -1) -> left
  if left <= 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key, 'c', fmt(c), 'p', fmt(p))
  pexpire(key, left)
end
--@ end

--@ section fast
-- Sliding window counter, one check, the common case written flat, as a
-- function for the one-check and batch scripts: a key that holds no state
-- or windows stored as instants. sliding_window_fast makes
-- sliding_window's decision with its formulas, as token_bucket_fast does
-- (token_bucket.lua), and returns nothing, having written nothing, for an
-- older state it leaves to the general code. A key holding the current
-- window with a count expires at the window's start + 2 periods, whichever
-- check of the window wrote it last: on the server's clock (server) a
-- check that adds to that count writes only the count and leaves the TTL.
local sw_b, sw_cap, sw_period, sw_cost -- its numbers at b (see token_bucket_fast)
local function sliding_window_fast(key, b, now, server)
  local floor = math.floor
  local v = redis.call('HMGET', key, 's', 'e', 'c', 'p', 'w')
  if b ~= sw_b then
    sw_b, sw_cap, sw_period, sw_cost = b, tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 4])
  end
  local period = sw_period
  local s, e, c, p = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
  if (not s and not v[5]) or (s and e and c and p) then
    local cap, cost = sw_cap, sw_cost
    --@ inline local sw_window(s, e, c, p, true, now, period) -> start, cur, prev, held, life
    --@ inline local sw_decide(start, cur, prev, now, period, cap, cost, life) -> allowed, remaining, retry, reset, total
    if remaining < 0 then remaining = 0 end
    if allowed == 1 then
      --@ inline local sw_write(key, start, period, total, prev, reset, held, server, intf) -> _
    end
    return allowed, remaining, retry, reset
  end
end
--@ end
