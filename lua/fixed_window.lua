-- Fixed window: two layouts, one per clock.
--
-- On the server's clock (TIME, the clock of TTLs), for a period of whole
-- ms, a key is a string, the count, whose TTL ends with its window: while
-- the key exists its window is the one it counts in, so a check of an
-- existing key reads no clock (fixed_window_one.lua); a new window reads
-- TIME once, to set the TTL. The expiry is set with PXAT to the window's
-- last ms: Redis keeps a key while its clock in ms has not passed that ms,
-- so exactly until the window ends. A count counts until its key expires,
-- whatever the period: a key written under a longer period keeps its count
-- until its window ends (at most one old period), and a clock that went
-- back finds its key held at the later window (Redis's TTLs follow the
-- same clock).
--
-- On a client's clock (Config.Now, which Redis's TTLs do not follow), or
-- for a period that is not a whole number of ms, a key is a hash {s =
-- window start µs, e = window end µs, c = count}. Windows are aligned to
-- the Unix epoch. Start and end are instants, so they mean the same under
-- any limit: the count still counts while now < e and the stored window
-- started in the current window of the current period (or later: the
-- clock went back, and the key is held at the later window), until e
-- under the period it was written with, else until e or the current
-- window's end, whichever comes first. A change of period never locks a
-- key for longer than one period of the new limit, nor beyond e (the key's
-- TTL). State written before windows were stored as instants, {w = window
-- index, c = count}, is read as a window of the current period.
--
-- Each reads the other layout (a redeploy meets hashes written before the
-- string layout, and calendar quotas share the hash), and a write turns
-- the key into the layout of its clock: a hash read on the server's clock
-- becomes a string whose TTL ends with the hash's window, count kept
-- (unless that end is not a whole ms: it stays a hash). A string read on
-- a client's clock counts until the key expires.

-- fixed_window_string returns the count of a string key and its expiry in
-- µs on the server's clock: the end of its window. It returns nothing for
-- a key without a TTL. A string that is not a count is an error of the
-- key's state. The expiry is read as an instant (PEXPIRETIME), not as a
-- PTTL added to a now read apart from it: a script held between the two
-- (a loaded server, a slow refund) would put the end early by the wait,
-- and a commit and its refund would name different windows. Redis before
-- 7 has no PEXPIRETIME: there the PTTL is added to now (when it is the
-- server's clock, else to TIME, read here), the present of the script.
local function fixed_window_string(key, v, now)
  local c = tonumber(v)
  if not c then error('fixed window key holds a string that is not a count') end
  local e = redis.pcall('PEXPIRETIME', key)
  if type(e) == 'number' then
    if e < 0 then return end
    return c, (e + 1) * 1000
  end
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then return end
  if not server_clock then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return c, (floor(now / 1000) + ttl + 1) * 1000
end

-- fixed_window_write stores count units in the window [start, stop) of a
-- limit of period µs. On the server's clock, for a period and a stop of
-- whole ms, the key is a string: a write to
-- the window the string holds (same and str) leaves its TTL, which ends
-- with the window; any other sets it (and replaces a hash). Else it is a
-- hash, whose TTL is set from the writer's now: on a client's clock every
-- write sets it again (a TTL set by another client whose clock runs ahead
-- would end the window early), on the server's only a new window's; str
-- says the key holds a string, which the hash replaces.
local function fixed_window_write(key, start, stop, count, now, same, str, period)
  if server_clock and stop % 1000 == 0 and period % 1000 == 0 then
    if same and str then
      redis.call('SET', key, fmt(count), 'KEEPTTL')
    else
      redis.call('SET', key, fmt(count), 'PXAT', fmt(stop / 1000 - 1))
    end
    return
  end
  if str then redis.call('DEL', key) end
  if same and not str then
    redis.call('HSET', key, 'c', fmt(count))
    if server_clock then return end
  else
    redis.call('HSET', key, 's', fmt(start), 'e', fmt(stop), 'c', fmt(count))
  end
  pexpire(key, stop - now)
end

-- fixed_window_load returns the stored window's start, end and count, or
-- nil; whether start and end are stored as such (a hash in the current
-- form); and whether the key is a string (its start is then unknown, and
-- returned as nil, its end as its expiry, see fixed_window_string).
local function fixed_window_load(key, period, now)
  local v
  if server_clock then
    v = redis.pcall('GET', key)
    if type(v) ~= 'table' then
      if not v then return nil end
      local c, e = fixed_window_string(key, v, now)
      if not c then return nil, nil, nil, false, true end
      return nil, e, c, false, true
    end
  end
  v = redis.pcall('HMGET', key, 's', 'e', 'c', 'w')
  if v.err then
    if not server_clock then
      local c, e = fixed_window_string(key, redis.call('GET', key), now)
      if not c then return nil, nil, nil, false, true end
      return nil, e, c, false, true
    end
    redis.call('HMGET', key, 'c') -- neither a string nor a hash: raises
  end
  local s, e, c = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  local stored = s ~= nil
  if not s then
    local w = tonumber(v[4])
    if not (w and c) then return nil end
    s = w * period
    e = s + period
  end
  if not (e and c) then return nil end
  return s, e, c, stored, false
end

local function fixed_window(key, cap, period, _, _, cost, now, commit)
  local s, e, c, stored, str = fixed_window_load(key, period, now)
  local start = floor(now / period) * period
  local stop = start + period
  local count = 0
  if str then
    -- a string counts until it expires; its end, read in ms (the TTL's
    -- unit), is the current window's end when within 1 ms of it
    if e and now < e then
      count = c
      if e < stop - 1000 or e > stop + 1000 then stop = e end
    end
  elseif s and now < e and s >= start then
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
  local same = (stored and start == s and stop == e) or (str and count > cost)
  if commit then fixed_window_write(key, start, stop, count, now, same, str, period) end
  return 1, cap - count, 0, stop - now, start, stop, count, now, same, str, period
end

-- Refund: take cost back from the window a commit at at wrote. That commit
-- replied reset = end - at, which names the window by its end. If another
-- commit has moved the key to another window since, the units no longer
-- count and there is nothing to give back; else the TTL stays (the window
-- ends when it did), whenever the refund comes. A string key's end is its
-- expiry, read to the ms: the commit's window if within 1 ms of its end
-- (windows of one key end at least a period, a whole ms, apart). The
-- expiry is the key's PTTL from now, the time the refund runs: on the
-- server's clock the script's now is that clock's present, and at, the
-- commit's instant, would put the end early by the refund's delay (a
-- compensation or cancel more than 1 ms after its commit gave nothing
-- back). A string whose end is not its commit's while the commit's
-- window is still current holds a count of that window whose end
-- something else changed (a PEXPIRE of the key, a RESTORE of it with a
-- TTL turned into an instant on another clock): the count still counts,
-- but the refund cannot tell the commit's units in it; it gives nothing
-- back, and returns true so that its caller reports it. (A string with no
-- TTL counts nothing: there is nothing to give back.)
local function fixed_window_refund(key, _, period, _, _, cost, at, reset, now)
  local v = redis.pcall('GET', key)
  if type(v) ~= 'table' then
    if not v then return end
    local c, e = fixed_window_string(key, v, now)
    if not c then return end
    local d = at + reset - e
    if d < -1000 or d > 1000 then return now < at + reset end
    if c - cost <= 0 then
      redis.call('DEL', key)
    else
      redis.call('SET', key, fmt(c - cost), 'KEEPTTL')
    end
    return
  end
  local _, e, c = fixed_window_load(key, period, now)
  if e ~= at + reset or not c then return end
  c = c - cost
  if c <= 0 then
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 'c', fmt(c))
  end
end
