-- Sliding window counter: hash {s = start µs of the stored window, e = its
-- end µs, c = count in it, p = count in the window before}. The estimate at
-- elapsed x into the current window is prev*(period-x)/period + cur,
-- computed with the same float64 operations, in the same order, as the Go
-- backend. Start and end are instants, so they mean the same under any
-- limit. Under an unchanged period (e - s) the stored window is the current
-- one, the previous one, or older. When the period changed, each stored
-- window's count goes to the window of the new period in which that stored
-- window started (the current one, the previous one, or none), and the
-- stored counts are forgotten when the key would have expired (e, plus the
-- old period if c > 0): no claim goes beyond that. Under an unchanged
-- period, a window that starts in the future (the clock went back) is held.
-- State written before windows were stored as instants, {w =
-- window index, c, p}, is read as windows of the current period.
local function sw_estimate(prev, period, e)
  return prev * (period - e) / period
end

local function sw_pass(prev, cur, cost, cap, period, e)
  return sw_estimate(prev, period, e) + (cur + cost) <= cap
end

-- First instant (µs) at which the check passes with no other traffic.
local function sw_wait(prev, cur, cost, cap, period, start, e)
  if cur + cost > cap then
    prev, cur, start, e = cur, 0, start + period, 0
  end
  local slack = cap - cur - cost
  local x = period - slack * period / prev
  if x >= 0 then x = floor(x) else x = -floor(-x) end
  if x < e then x = e end
  if x > period then x = period end
  while x < period and not sw_pass(prev, cur, cost, cap, period, x) do x = x + 1 end
  while x > e and sw_pass(prev, cur, cost, cap, period, x - 1) do x = x - 1 end
  return start + x
end

local function sw_reset(start, period, now, cur, prev)
  if cur > 0 then return start + 2 * period - now end
  if prev > 0 then return start + period - now end
  return 0
end

-- sw_clamp bounds a claim d (µs from now), when life is not -1, by the
-- instant life at which the stored counts are forgotten.
local function sw_clamp(d, life, now)
  if life >= 0 and d > life - now then d = life - now end
  if d < 0 then d = 0 end
  return d
end

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

-- sw_map adds n units counted in a window that started at from to the
-- current (cur) or previous (prev) window of period that starts at start.
local function sw_map(from, n, start, period, cur, prev)
  if from >= start then return cur + n, prev end
  if from >= start - period then return cur, prev + n end
  return cur, prev
end

local function sw_trunc(x)
  if x >= 0 then return floor(x) end
  return -floor(-x)
end

-- sliding_window_write stores the counts of the window [start, start +
-- period) and the one before, expiring in reset µs. When the key holds
-- that window with a count (held), it expires at start + 2 periods
-- already: on the server's clock only the count changes (see
-- sliding_window_one.lua).
local function sliding_window_write(key, start, period, cur, prev, reset, held)
  if held and server_clock then
    redis.call('HSET', key, 'c', fmt(cur))
    return
  end
  redis.call('HSET', key, 's', fmt(start), 'e', fmt(start + period), 'c', fmt(cur), 'p', fmt(prev))
  pexpire(key, reset)
end

local function sliding_window(key, cap, period, _, _, cost, now, commit)
  local s, e, c, p, stored = sw_load(key, period)
  local start = floor(now / period) * period
  local cur, prev = 0, 0
  local life = -1
  local held = false -- the key holds this window, with a count
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
        cur, prev = sw_map(s, c, start, period, cur, prev)
        cur, prev = sw_map(s - old, p, start, period, cur, prev)
      end
    end
  end
  local x = now - start
  if x < 0 then x = 0 end
  local est = sw_estimate(prev, period, x)
  local remaining = sw_trunc(cap - est - cur)
  local reset = sw_clamp(sw_reset(start, period, now, cur, prev), life, now)
  if cost > cap then return 0, remaining, 0, reset end
  if not sw_pass(prev, cur, cost, cap, period, x) then
    return 0, remaining, sw_clamp(sw_wait(prev, cur, cost, cap, period, start, x) - now, life, now), reset
  end
  cur = cur + cost
  reset = sw_clamp(sw_reset(start, period, now, cur, prev), -1, now)
  if commit then sliding_window_write(key, start, period, cur, prev, reset, held) end
  return 1, sw_trunc(cap - est - cur), 0, reset, start, period, cur, prev, reset, held
end

-- Refund: take cost back from the window a commit at at added it to, named
-- by the commit's reply reset = start + 2*period - at. The units are the
-- current count while the key is still at that window, the previous count
-- once it has moved on to the next, and forgotten after that (or once the
-- period has changed); the key then lives as the state left needs at now.
local function sliding_window_refund(key, _, period, _, _, cost, at, reset, now)
  now = now or at
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
  local reset_now = sw_reset(w, period, now, c, p)
  if reset_now <= 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key, 'c', fmt(c), 'p', fmt(p))
  pexpire(key, reset_now)
end
