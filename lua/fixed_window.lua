-- Fixed window: hash {s = window start µs, e = window end µs, c = count}.
-- Windows are aligned to the Unix epoch. Start and end are instants, so they
-- mean the same under any limit: the count still counts while now < e and
-- the stored window started in the current window of the current period
-- (or later: the clock went back, and the key is held at the later window),
-- until e under the period it was written with, else until e or the current
-- window's end, whichever comes first. A change of period never locks a key
-- for longer than one period of the new limit, nor beyond e (the key's TTL).
-- State written before windows were stored as instants, {w = window index,
-- c = count}, is read as a window of the current period.
-- fixed_window_write stores count units in the window [start, stop). When
-- that is the window the key holds (same) and now is the server's clock,
-- only the count changes: the key's TTL already ends with the window (see
-- fixed_window_one.lua). On a client's clock the TTL is set again from
-- the writer's now.
local function fixed_window_write(key, start, stop, count, now, same)
  if same and server_clock then
    redis.call('HSET', key, 'c', fmt(count))
    return
  end
  redis.call('HSET', key, 's', fmt(start), 'e', fmt(stop), 'c', fmt(count))
  pexpire(key, stop - now)
end

-- fixed_window_load returns the stored window's start, end and count, or
-- nil, and whether start and end are stored as such (not the older form).
local function fixed_window_load(key, period)
  local v = redis.call('HMGET', key, 's', 'e', 'c', 'w')
  local s, e, c = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  local stored = s ~= nil
  if not s then
    local w = tonumber(v[4])
    if not (w and c) then return nil end
    s = w * period
    e = s + period
  end
  if not (e and c) then return nil end
  return s, e, c, stored
end

local function fixed_window(key, cap, period, _, _, cost, now, commit)
  local s, e, c, stored = fixed_window_load(key, period)
  local start = floor(now / period) * period
  local stop = start + period
  local count = 0
  if s and now < e and s >= start then
    count, start = c, s
    if e - s ~= period or s % period ~= 0 then -- another period, or a calendar window
      if e < stop then stop = e end
    else
      stop = e -- the current window, or a later one: the clock went back
    end
  end
  local reset = 0
  if count > 0 then reset = stop - now end
  if cost > cap then return 0, cap - count, 0, reset end
  if count + cost > cap then return 0, cap - count, stop - now, reset end
  count = count + cost
  -- the window the key holds, unchanged
  local same = stored and start == s and stop == e
  if commit then fixed_window_write(key, start, stop, count, now, same) end
  return 1, cap - count, 0, stop - now, start, stop, count, now, same
end

-- Refund: take cost back from the window a commit at at wrote. That commit
-- replied reset = end - at, which names the window by its end. If another
-- commit has moved the key to another window since, the units no longer
-- count and there is nothing to give back; else the TTL stays (the window
-- ends when it did), whenever the refund comes.
local function fixed_window_refund(key, _, period, _, _, cost, at, reset)
  local _, e, c = fixed_window_load(key, period)
  if e ~= at + reset or not c then return end
  c = c - cost
  if c <= 0 then
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 'c', fmt(c))
  end
end
