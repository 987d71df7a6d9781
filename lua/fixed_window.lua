-- Fixed window: its arithmetic (the formulas) and the code each script
-- holds (the sections after them). A calendar quota (calendar.lua) decides
-- with window_decide and reads a fixed window's string with
-- fixed_window_string. algorithms/internal/calc/fixed_window.go is the Go
-- twin.
--
-- Two layouts, one per clock.
--
-- On the server's clock (TIME, the clock of TTLs), for a period of whole
-- ms, a key is a string, the count, whose TTL ends with its window: while
-- the key exists its window is the one it counts in, so a check of an
-- existing key reads no clock (fw_count); a new window reads TIME once, to
-- set the TTL. The expiry is set with PXAT to the window's last ms: Redis
-- keeps a key while its clock in ms has not passed that ms, so exactly
-- until the window ends. A count counts until its key expires, whatever
-- the period: a key written under a longer period keeps its count until
-- its window ends (at most one old period), and a clock that went back
-- finds its key held at the later window (Redis's TTLs follow the same
-- clock).
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

--@ formula window_end(now, period) -> start, stop
-- the window of period (µs) that holds now, aligned to the Unix epoch
-- (Lua's a % b is a - floor(a / b) * b: no call of floor, which the
-- string layout's common case then need not define)
start = now - now % period
stop = start + period
--@ end

--@ formula window_decide(count, stop, now, cap, cost) -> allowed, remaining, retry, reset, total
-- a check of cost units at now in a window that holds count units and
-- ends at stop (calc's window): allowed (1/0), remaining (below 0 when the
-- count is above the capacity: callers clamp), retry_after and
-- reset_after µs, and the count it leaves, total (count when denied)
allowed, remaining, retry, reset, total = 0, cap - count, 0, 0, count
if count > 0 then reset = stop - now end
if cost <= cap then
  if count + cost > cap then
    retry = stop - now
  else
    allowed, total, reset = 1, count + cost, stop - now
    remaining = cap - total
  end
end
--@ end

--@ formula fw_window(s, e, c, str, now, period) -> count, start, stop
-- the count that a key holding the window [s, e) with c units (a hash;
-- with str, a string: its count c until its expiry e, its start unknown)
-- still counts at now under period, and the window [start, stop) a check
-- at now writes to
--@ inline window_end(now, period) -> start, stop
count = 0
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
--@ end

--@ formula fw_string_end(ms) -> e
-- the end, in µs, of the window of a string whose expiry (or TTL) is ms:
-- Redis keeps a key through the ms of its expiry
e = (ms + 1) * 1000
--@ end

--@ formula fw_pxat(stop) -> last
-- the expiry, for PXAT, of a string whose window ends at stop (µs, a
-- whole ms): the window's last ms, written with '%d' where its length
-- proves it exact (a ms on the server's clock has 13 digits; see
-- lua/doc.go), else with '%.0f'
local ms = stop / 1000 - 1
last = string.format('%d', ms)
if #last < 12 then last = string.format('%.0f', ms) end
--@ end

--@ formula fw_count(key, cap, period, cost, ncost, now) -> count, reset
-- The common case on the server's clock, for a period of whole ms (µs)
-- and a cost (as sent: an integer string, which INCRBY and DECRBY get
-- without formatting a Lua number again; ncost, the same as a number) no
-- larger than cap (a number, or the string ARGV holds): count is the key's
-- count with the cost added (the check is allowed if and only if it is at
-- most cap; a denial took its units back with DECRBY, so a denied check
-- consumes nothing) and reset reset_after in µs. The key is a string
-- whose TTL ends with its window: a key with a TTL is the current window,
-- and the check reads no clock. A key INCRBY created (no TTL, count =
-- cost) starts a window: now (TIME when nil), and its expiry at the
-- window's last ms (PEXPIREAT), with NX (Redis 7), so that a window
-- refunds emptied (count = cost again, its TTL kept) keeps its own end,
-- which PTTL then reads; that costs a new key no PTTL. Redis 6 refuses
-- NX: PTTL tells the two apart. Anything else (a hash: INCRBY fails; a
-- string with no TTL that was there before) is left unchanged, count nil,
-- to the general code.
local c = redis.pcall('INCRBY', key, cost)
if type(c) == 'number' then
  local set, t, stop = 0, now, nil
  if c == ncost then
    if not t then
      local tt = redis.call('TIME')
      t = tt[1] * 1000000 + tt[2]
    end
    -- the period read once: an ARGV string is parsed at each use
    local start
    --@ inline window_end(t, period + 0) -> start, stop
    if stop - t <= 1000 then
      -- the window's last ms: an expiry at that ms, set in it, would
      -- delete the key at once (Redis deletes a key whose expiry is not
      -- after the time of the command setting it), so that every check
      -- of the ms would find no count. Undone, left to the general code,
      -- which writes such a window as a hash (fixed_window_write).
      if redis.call('PTTL', key) < 0 then
        redis.call('DEL', key)
      else
        redis.call('DECRBY', key, cost)
      end
      c = nil
    else
      --@ inline local fw_pxat(stop) -> last
      set = redis.pcall('PEXPIREAT', key, last, 'NX')
    end
  end
  if not c then
    -- left to the general code
  elseif set == 1 then
    count, reset = c, stop - t
  else
    local ttl = redis.call('PTTL', key)
    if ttl >= 0 then
      if c > tonumber(cap) then redis.call('DECRBY', key, cost) end
      count = c
      --@ inline fw_string_end(ttl) -> reset
    elseif c == ncost then
      -- Redis 6: no TTL, so a window starts
      redis.call('PEXPIREAT', key, stop / 1000 - 1)
      count, reset = c, stop - t
    else
      redis.call('DECRBY', key, cost)
    end
  end
end
--@ end

--@ formula fw_hash_write(key, start, stop, total, now, same, server) -> done
-- stores total units in the window [start, stop) of a hash: same says it
-- holds that window already, whose count alone changes. Its TTL is set
-- from the writer's now: on a client's clock every write sets it again (a
-- TTL set by another client whose clock runs ahead would end the window
-- early), on the server's only a new window's. Integers are written with
-- '%d' where the window's end (a µs on a real clock has 16 digits) proves
-- it exact, else with '%.0f'
local f = '%d'
if #string.format(f, stop) < 12 then f = '%.0f' end
if same then
  redis.call('HSET', key, 'c', string.format(f, total))
else
  redis.call('HSET', key, 's', string.format(f, start), 'e', string.format(f, stop), 'c', string.format(f, total))
end
if not (same and server) then
  redis.call('PEXPIRE', key, string.format(f, floor((stop - now + 999) / 1000)))
end
done = true
--@ end

--@ formula fw_hash_refund(key, e, c, at, reset, cost) -> gave
-- gives back cost units of a hash's count c, if its window's end e is the
-- one the commit at at replied (reset = e - at); gave says it did
gave = false
if c and e == at + reset then
  if c - cost <= 0 then
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 'c', string.format('%.0f', c - cost))
  end
  gave = true
end
--@ end

--@ formula fw_hash_check(key, cap, period, cost, now, server) -> allowed, remaining, retry, reset
-- one check of a key that holds no state or a hash {s, e, c}, decided and
-- written (HMGET, then HSET and PEXPIRE as fw_hash_write writes): the
-- hash layout's common case, on a client's clock or for a period of no
-- whole ms; now is the server's clock (TIME) when nil, read once the key
-- is known to be decided here. allowed is nil, nothing written, for any
-- other key (a string; an older {w, c} hash), which the general code
-- decides. remaining is clamped at 0.
local v = redis.pcall('HMGET', key, 's', 'e', 'c', 'w')
if not v.err then
  local s, e, c = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  if (not s and not v[4]) or (s and e and c) then
    local t = now
    if not t then
      local tt = redis.call('TIME')
      t = tt[1] * 1000000 + tt[2]
    end
    --@ inline local fw_window(s, e, c, false, t, period) -> count, start, stop
    local total
    --@ inline window_decide(count, stop, t, cap, cost) -> allowed, remaining, retry, reset, total
    if remaining < 0 then remaining = 0 end
    if allowed == 1 then
      --@ inline local fw_hash_write(key, start, stop, total, t, s == start and e == stop, server) -> _
    end
  end
end
--@ end

--@ section string
-- Fixed window (fixed_window.lua): on the server's clock, for a period of
-- whole ms, a string, the count, whose expiry ends its window; else a
-- hash {s = start µs, e = end µs, c = count}.

-- fixed_window_string returns the count of a string key and its expiry in
-- µs on the server's clock: the end of its window. It returns nothing for
-- a key without a TTL. A string that is not a count is an error of the
-- key's state. The expiry is read as an instant (PEXPIRETIME), not as a
-- PTTL added to a now read apart from it: a script held between the two
-- (a loaded server, a slow refund) would put the end early by the wait,
-- and a commit and its refund would name different windows. Redis before
-- 7 has no PEXPIRETIME: there the PTTL is added to now (when it is the
-- server's clock, else to TIME, read here), the present of the script.
local function fixed_window_string(key, v, now, server)
  local c = tonumber(v)
  if not c then error('fixed window key holds a string that is not a count') end
  local ms = redis.pcall('PEXPIRETIME', key)
  if type(ms) ~= 'number' then
    local ttl = redis.call('PTTL', key)
    if ttl < 0 then return end
    if not server then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    ms = floor(now / 1000) + ttl
  end
  if ms < 0 then return end
  --@ inline local fw_string_end(ms) -> e
  return c, e
end
--@ end

--@ section functions
-- fixed_window_write stores count units in the window [start, stop) of a
-- limit of period µs. On the server's clock, for a period and a stop of
-- whole ms, the key is a string: a write to
-- the window the string holds (same and str) leaves its TTL, which ends
-- with the window; any other sets it (and replaces a hash), but in the
-- window's last ms, where an expiry at that ms would delete the key at
-- once. Else it is a hash (fw_hash_write, whose TTL ends a ms after the
-- window and whose end says when its count stops counting); str says
-- the key holds a string, which the hash replaces.
local function fixed_window_write(key, start, stop, count, now, same, str, server, period)
  if server and stop % 1000 == 0 and period % 1000 == 0 and (same and str or stop - now > 1000) then
    if same and str then
      redis.call('SET', key, fmt(count), 'KEEPTTL')
    else
      --@ inline local fw_pxat(stop) -> last
      redis.call('SET', key, fmt(count), 'PXAT', last)
    end
    return
  end
  if str then
    redis.call('DEL', key)
    same = false
  end
  --@ inline local fw_hash_write(key, start, stop, count, now, same, server) -> _
end

-- fixed_window_load returns the stored window's start, end and count, or
-- nil; whether start and end are stored as such (a hash in the current
-- form); and whether the key is a string (its start is then unknown, and
-- returned as nil, its end as its expiry, see fixed_window_string).
local function fixed_window_load(key, period, now, server)
  local v
  if server then
    v = redis.pcall('GET', key)
    if type(v) ~= 'table' then
      if not v then return nil end
      local c, e = fixed_window_string(key, v, now, server)
      if not c then return nil, nil, nil, false, true end
      return nil, e, c, false, true
    end
  end
  v = redis.pcall('HMGET', key, 's', 'e', 'c', 'w')
  if v.err then
    if not server then
      local c, e = fixed_window_string(key, redis.call('GET', key), now, server)
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

local function fixed_window(key, cap, period, _, _, cost, now, commit, server)
  local s, e, c, stored, str = fixed_window_load(key, period, now, server)
  --@ inline local fw_window(s, e, c, str, now, period) -> count, start, stop
  --@ inline local window_decide(count, stop, now, cap, cost) -> allowed, remaining, retry, reset, total
  -- the window the key holds, unchanged
  local same = (stored and start == s and stop == e) or (str and count > 0)
  if allowed == 1 and commit then fixed_window_write(key, start, stop, total, now, same, str, server, period) end
  return allowed, remaining, retry, reset, start, stop, total, now, same, str, server, period
end

-- Refund: take cost back from the window a commit at at wrote. That commit
-- replied reset = end - at, which names the window by its end. If another
-- commit has moved the key to another window since, the units no longer
-- count and there is nothing to give back; else the TTL stays (the window
-- ends when it did), whenever the refund comes. A string key's end is its
-- expiry, read to the ms: the commit's window if within 1 ms of its end
-- (windows of one key end at least a period, a whole ms, apart). A string
-- whose end is not its commit's while the commit's window is still
-- current holds a count of that window whose end something else changed
-- (a PEXPIRE of the key, a RESTORE of it with a TTL turned into an instant
-- on another clock): the count still counts, but the refund cannot tell
-- the commit's units in it; it gives nothing back, and returns true so
-- that its caller reports it. (A string with no TTL counts nothing: there
-- is nothing to give back.)
local function fixed_window_refund(key, _, period, _, _, cost, at, reset, now, _, server)
  local v = redis.pcall('GET', key)
  if type(v) ~= 'table' then
    if not v then return end
    local c, e = fixed_window_string(key, v, now, server)
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
  local _, e, c = fixed_window_load(key, period, now, server)
  --@ inline local fw_hash_refund(key, e, c, at, reset, cost) -> _
end
--@ end

--@ section one
-- The fixed window's one-check script starts here: a check that is not a
-- part of a call spanning slots (KEYS[3]) is decided flat, before any
-- function is defined: on the server's clock, for a period of whole ms
-- and a cost that can fit, by fw_count (the commands ulule/limiter's
-- counter needs: INCRBY then PTTL); else, a hash or no state, by
-- fw_hash_check. What they leave goes on to the general code. See one.lua
-- for KEYS, ARGV and the reply, which leaves out the now, as
-- one_fast.lua's.
if not KEYS[3] then
  local floor = math.floor
  local key, cap, period, cost = KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[6]
  local ncost, server = tonumber(cost), ARGV[1] == '0'
  local allowed, remaining, retry, reset, total
  if server and ncost <= cap and period % 1000 == 0 then
    --@ inline local fw_count(key, cap, period, cost, ncost, nil) -> count, until_end
    if count then
      --@ inline window_decide(count - ncost, until_end, 0, cap, ncost) -> allowed, remaining, retry, reset, total
    end
  elseif not server or period % 1000 ~= 0 then
    local now
    if not server then now = tonumber(ARGV[1]) end
    --@ inline fw_hash_check(key, cap, period, ncost, now, server) -> allowed, remaining, retry, reset
  end
  if allowed then
    -- the reply of one.lua's fast paths (a denial while the key's
    -- pending marker exists is 2: a refund may still undo it)
    if allowed == 0 and KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then allowed = 2 end
    if remaining < 0 then remaining = 0 end
    return {allowed, remaining, retry, reset}
  end
end
--@ end

--@ section lean
-- The fixed window's lean script: one check on the server's clock, no
-- marker keys and a cost no larger than the capacity (the Go side sends
-- it only then), decided as the one-check script decides it, with only
-- the numbers that needs: every ARGV a script is sent costs Redis about as
-- much as a command (parsing it, a Lua string, a slot of ARGV), and the
-- one-check script's other four (now, r, u and, most often, a cost of 1)
-- go unread there.
--
-- KEYS[1]   the storage key (see fixed_window.lua)
-- ARGV[1]   capacity
-- ARGV[2]   period in µs
-- ARGV[3]   the cost, when it is not 1 or ARGV[4] is sent
-- ARGV[4]   'h' for a period of no whole ms (the key is a hash), which
--           the script so tells without parsing the period (a string's
--           arithmetic costs Redis a strtod on every call)
--
-- Reply, for a period of whole ms (fw_count): {count, reset_after µs},
-- count being the key's count with this check's cost added, and the check
-- allowed if and only if it is at most the capacity (a denial took its
-- units back: a denied check consumes nothing); the Go side makes the
-- Result from it, the capacity and the cost (calc.CountOutcome). For a
-- period of no whole ms (a hash: fw_hash_check): allowed (0 or 1),
-- remaining, retry_after µs, reset_after µs, as one.lua's fast paths
-- reply. An empty reply leaves the check, undecided and with nothing
-- written, to the algorithm's one-check script (a key of the other
-- layout: an older layout, a calendar quota's window, a client clock's
-- write; a string with no TTL that was there before).
local key, cap, period, cost, ncost = KEYS[1], ARGV[1], ARGV[2], '1', 1
if ARGV[3] then cost, ncost = ARGV[3], tonumber(ARGV[3]) end
if not ARGV[4] then
  --@ inline local fw_count(key, cap, period, cost, ncost, nil) -> count, reset
  if count then return {count, reset} end
  return {}
end
local floor = math.floor
--@ inline local fw_hash_check(key, tonumber(cap), tonumber(period), ncost, nil, true) -> allowed, remaining, retry, reset
if allowed then return {allowed, remaining, retry, reset} end
return {}
--@ end

--@ section fast
-- Fixed window, one check, the common case, as a function for the batch
-- scripts (batch_fast.lua, batch.lua's fasts): fixed_window_fast decides
-- it as the one-check script's flat head does, fw_count on the server's
-- clock for a period of whole ms and a cost that can fit, else
-- fw_hash_check, on key with ARGV[b..b+4] (capacity, period, r, u, cost)
-- at now (server: on the server's clock), and returns allowed, remaining,
-- retry_after, reset_after as one.lua replies them; it returns nothing,
-- having written nothing, for what it leaves to the general code. It
-- parses the numbers at one position b once per script (see
-- token_bucket_fast).
local fw_b, fw_cap, fw_period, fw_cost
local function fixed_window_fast(key, b, now, server)
  local floor = math.floor
  if b ~= fw_b then
    fw_b, fw_cap, fw_period, fw_cost = b, tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 4])
  end
  local cap, period, cost = fw_cap, fw_period, fw_cost
  if server and cost <= cap and period % 1000 == 0 then
    --@ inline local fw_count(key, cap, period, ARGV[b + 4], cost, now) -> count, until_end
    if not count then return end
    --@ inline local window_decide(count - cost, until_end, 0, cap, cost) -> allowed, remaining, retry, reset, _
    if remaining < 0 then remaining = 0 end
    return allowed, remaining, retry, reset
  end
  --@ inline local fw_hash_check(key, cap, period, cost, now, server) -> allowed, remaining, retry, reset
  return allowed, remaining, retry, reset
end
--@ end
