-- Sliding window counter: hash {w = window index, c = count in w, p = count
-- in w-1}. The estimate at elapsed e into the window is
-- prev*(period-e)/period + cur, computed with the same float64 operations, in
-- the same order, as the Go backend.
local function sw_estimate(prev, period, e)
  return prev * (period - e) / period
end

local function sw_pass(prev, cur, cost, cap, period, e)
  return sw_estimate(prev, period, e) + (cur + cost) <= cap
end

-- First instant (µs) at which the check passes with no other traffic.
local function sw_wait(prev, cur, cost, cap, period, win, e)
  local start = win * period
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

local function sw_reset(win, period, now, cur, prev)
  if cur > 0 then return (win + 2) * period - now end
  if prev > 0 then return (win + 1) * period - now end
  return 0
end

local function sw_trunc(x)
  if x >= 0 then return floor(x) end
  return -floor(-x)
end

-- sliding_window_write stores the counts of window win and the one before,
-- expiring in reset µs.
local function sliding_window_write(key, win, cur, prev, reset)
  redis.call('HSET', key, 'w', fmt(win), 'c', fmt(cur), 'p', fmt(prev))
  pexpire(key, reset)
end

local function sliding_window(key, cap, period, _, _, cost, now, commit)
  local v = redis.call('HMGET', key, 'w', 'c', 'p')
  local w, c, p = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  local win = floor(now / period)
  local cur, prev = 0, 0
  if w and c and p then
    if win < w then win = w end
    if win == w then
      cur, prev = c, p
    elseif win == w + 1 then
      prev = c
    end
  end
  local e = now - win * period
  if e < 0 then e = 0 end
  local est = sw_estimate(prev, period, e)
  local remaining = sw_trunc(cap - est - cur)
  local reset = sw_reset(win, period, now, cur, prev)
  if cost > cap then return 0, remaining, 0, reset end
  if not sw_pass(prev, cur, cost, cap, period, e) then
    return 0, remaining, sw_wait(prev, cur, cost, cap, period, win, e) - now, reset
  end
  cur = cur + cost
  reset = sw_reset(win, period, now, cur, prev)
  if commit then sliding_window_write(key, win, cur, prev, reset) end
  return 1, sw_trunc(cap - est - cur), 0, reset, win, cur, prev, reset
end

-- Refund (Cluster compensation): take cost back from the window a commit at
-- now added it to, win, named by the commit's reply reset =
-- (win+2)*period - now. The units are the current count while the key is
-- still at win, the previous count once it has moved on to win+1, and
-- forgotten after that.
local function sliding_window_refund(key, _, period, _, _, cost, now, reset)
  local win = floor((now + reset) / period) - 2
  local v = redis.call('HMGET', key, 'w', 'c', 'p')
  local w, c, p = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  if not (w and c and p) then return end
  if w == win then
    c = c - cost
    if c < 0 then c = 0 end
  elseif w == win + 1 then
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
