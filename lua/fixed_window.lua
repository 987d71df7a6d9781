-- Fixed window: hash {w = window index, c = count}. Windows are aligned to
-- the Unix epoch; a clock that goes back is held at the stored window.
-- fixed_window_write stores count units in window win, ending in to_end µs.
local function fixed_window_write(key, win, count, to_end)
  redis.call('HSET', key, 'w', fmt(win), 'c', fmt(count))
  pexpire(key, to_end)
end

local function fixed_window(key, cap, period, _, _, cost, now, commit)
  local v = redis.call('HMGET', key, 'w', 'c')
  local w, c = tonumber(v[1]), tonumber(v[2])
  local win = floor(now / period)
  local count = 0
  if w and c then
    if win < w then win = w end
    if win == w then count = c end
  end
  local to_end = (win + 1) * period - now
  local reset = 0
  if count > 0 then reset = to_end end
  if cost > cap then return 0, cap - count, 0, reset end
  if count + cost > cap then return 0, cap - count, to_end, reset end
  count = count + cost
  if commit then fixed_window_write(key, win, count, to_end) end
  return 1, cap - count, 0, to_end, win, count, to_end
end

-- Refund (Cluster compensation): take cost back from the window a commit at
-- now wrote. That commit replied reset = (win+1)*period - now, which names
-- the window even when the clock was held at a later stored one. If another
-- commit has moved the key to a later window since, the units no longer
-- count and there is nothing to give back.
local function fixed_window_refund(key, _, period, _, _, cost, now, reset)
  local win = floor((now + reset) / period) - 1
  local v = redis.call('HMGET', key, 'w', 'c')
  local w, c = tonumber(v[1]), tonumber(v[2])
  if w ~= win or not c then return end
  c = c - cost
  if c <= 0 then
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 'c', fmt(c))
  end
end
