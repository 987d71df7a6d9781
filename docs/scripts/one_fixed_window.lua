-- one_fixed_window.lua: generated from the sources in lua/ by
-- go test ./lua -run TestScriptFiles -update; do not edit.
--
-- Decides one fixed_window check: the common call, a script of its own holding only this algorithm.
--
-- KEYS:
--   KEYS[1]  the storage key
--   KEYS[2]  sharded clients (Cluster, Ring): the key's pending marker
--   KEYS[3]  one part of a call spanning slots: the call's commit marker
-- ARGV:
--   ARGV[1]     now in µs; 0: the server's clock (TIME)
--   ARGV[2..6]  capacity, period µs, r, u, cost (see prelude.lua)
--   ARGV[7]     with KEYS[3]: the refund window in ms
-- Reply:
--   allowed (0 denied, 1 allowed, 2 denied while a refund may
--   still undo it), remaining, retry_after µs, reset_after µs, and the now
--   in µs (left out by a fast path for a call without KEYS[3])
--
-- SHA1 bb371dc8cf1e0a0075543dbb8c9aee019ac1134d (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from, in order: now.lua, fast.lua, fixed_window_one.lua, one_fast.lua, prelude.lua, fixed_window.lua, one.lua,
-- joined with the glue lines of lua.go. The sources' headers say more.
-- ---- the script, as sent ----
-- The now of a script, in µs: ARGV[1], or the server clock (TIME) when it
-- is 0 (compared as the string the Go side sends: parsing a number costs
-- more). It starts every one-check script (see one.lua), and the Go side
-- joins it before the entry point of the others (dispatch.lua, refund.lua,
-- release.lua, renew.lua), which read now from it.
local now = ARGV[1]
if now == '0' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(now)
end
-- intf formats the integers that the flat fast paths (<algorithm>_one.lua,
-- batch.lua) write: '%d', which is faster, where Lua's C long holds 2^53,
-- else '%.0f'; both write an integer below 2^53 alike.
local intf = string.format('%d', 9007199254740992) == '9007199254740992' and '%d' or '%.0f'
-- Fixed window, one check, the common case written flat: a key that holds
-- no state, or a window stored under the same period (not a calendar
-- quota's window of the same length). fixed_window_fast
-- makes fixed_window's decision as token_bucket_fast does
-- (token_bucket_one.lua). server is true when now is the server's clock,
-- the clock of TTLs: a write to the window the key holds then leaves its
-- TTL, which already ends with the window. On a client's clock every
-- write sets the TTL again, measured from the writer's now: a TTL set by
-- another client whose clock runs ahead would end the window early.
local fw_b, fw_cap, fw_period, fw_cost -- its numbers at b (see token_bucket_one.lua)
local function fixed_window_fast(key, b, now, server)
  local v = redis.call('HMGET', key, 's', 'e', 'c', 'w')
  if b ~= fw_b then
    fw_b, fw_cap, fw_period, fw_cost = b, tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 4])
  end
  local period = fw_period
  local s, e, c = tonumber(v[1]), tonumber(v[2]), tonumber(v[3])
  if (not s and not tonumber(v[4])) or (s and e and c and e - s == period and s % period == 0) then
    local cap, cost = fw_cap, fw_cost
    local start = math.floor(now / period) * period
    local stop = start + period
    local count = 0
    local same = false
    if s and now < e and s >= start then
      -- the current window, or a later one: the clock went back
      count, start, stop, same = c, s, e, true
    end
    local reset = 0
    if count > 0 then reset = stop - now end
    local remaining = cap - count
    if remaining < 0 then remaining = 0 end
    if cost > cap then return 0, remaining, 0, reset end
    if count + cost > cap then return 0, remaining, stop - now, reset end
    count = count + cost
    -- fixed_window_write(key, start, stop, count, now); a window
    -- already stored keeps its start and end, and on the server's clock
    -- its TTL
    if same then
      redis.call('HSET', key, 'c', string.format(intf, count))
    else
      redis.call('HSET', key, 's', string.format(intf, start), 'e', string.format(intf, stop), 'c', string.format(intf, count))
    end
    if not (same and server) then
      redis.call('PEXPIRE', key, string.format(intf, math.floor((stop - now + 999) / 1000)))
    end
    return 1, cap - count, 0, stop - now
  end
end
local fast = fixed_window_fast
-- The fast path of a one-check script whose algorithm's fast path is a
-- function (the Go side names it `fast`): it decides the common case, and
-- a call whose part of a call spanning slots (KEYS[3]) must set markers
-- goes to the general code. See one.lua for KEYS, ARGV and the reply,
-- which here leaves out the now: the Go side needs it only from a call
-- with a commit marker.
if not KEYS[3] then
  local allowed, remaining, retry, reset = fast(KEYS[1], 2, now, ARGV[1] == '0')
  if allowed then
    if allowed ~= 1 and KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then allowed = 2 end
    if remaining < 0 then remaining = 0 end
    return {allowed, remaining, retry, reset}
  end
end
-- redlimit's scripts: each is this prelude, one or all of the algorithm
-- files, then an entry point. one.lua decides one check (the common case)
-- with the script of that check's algorithm; dispatch.lua decides several
-- checks all-or-nothing, or refunds, with the script holding all five;
-- batch.lua decides several queued calls, one after another.
--
-- Every algorithm file defines three functions; the first and the last
-- take the same parameters, of which each uses what it needs:
--
--   <name>(key, cap, period, r, u, cost, now, commit)
--     evaluates a check of cost units at now (µs), and returns four
--     integers: allowed (0/1), remaining, retry_after µs, reset_after µs.
--     When the check passes it also returns the arguments after key of
--     <name>_write, and calls it itself if commit is true.
--   <name>_write(key, ...)
--     writes the state a passing check left, with its TTL. The dispatch
--     calls it once every check of a request has passed, without reading
--     the keys again.
--   <name>_refund(key, cap, period, r, u, cost, at, reset, now)
--     gives back cost units that a commit at at, which replied
--     reset_after = reset, took, as they stand at now: right after the
--     commit (now nil, meaning at: Redis Cluster compensation, see
--     dispatch.lua) or later (charge after the response, refund.lua).
--
-- cap is the capacity in units, period the window or refill period in µs;
-- token_bucket and gcra refill r scaled units per µs, one unit being u
-- scaled units, so every refill is an exact integer.
--
-- A key's state expires when it would read as a full bucket: its TTL is
-- reset_after rounded up to the ms, so a key that expires is
-- indistinguishable from a key at full capacity.
--
-- Numbers are float64: every integer here stays below 2^53 (the Go side
-- validates limits so that it does), and every number sent back to Redis is
-- formatted with %.0f so no exponent notation reaches a key.

local floor = math.floor

-- server_clock is true while the check being decided has its now from the
-- server's clock (TIME), which is also the clock of TTLs. The entry points
-- that decide checks set it (one.lua, dispatch.lua, batch.lua).
local server_clock = false

local function fmt(n)
  return string.format('%.0f', n)
end

-- ceil(a / b) for integers a >= 0, b > 0 (exact below 2^53).
local function ceil_div(a, b)
  return floor((a + b - 1) / b)
end

local function pexpire(key, us)
  redis.call('PEXPIRE', key, fmt(ceil_div(us, 1000)))
end

-- zadd_units adds cost members to the sorted set key, each scored score
-- (a string) and named "<prefix>:<n>" for n from first: a sliding log's
-- entries, a concurrency lease's slots. A ZADD takes 100 at a time, so that
-- a large cost never passes Lua's limit on unpack.
local function zadd_units(key, score, prefix, first, cost)
  local args = {}
  local i = 0
  while i < cost do
    args[#args + 1] = score
    args[#args + 1] = prefix .. ':' .. fmt(first + i)
    i = i + 1
    if #args == 200 or i == cost then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
end

-- bucket_debt returns the time-debt at now, in 1/r µs, of a token bucket or
-- GCRA key that is full at the instant a + b/rs µs (b < rs), and whether it
-- was cut to full (cap*u). A fraction counted in another refill (rs ~= r) is
-- rounded up to the next whole µs. same says that the key was written under
-- a limit of the same full window (tau, ceil(full/r) µs, which every bucket
-- key stores): then the debt is never cut, since more than a full bucket
-- means that the clock went back, and the key waits for it to catch up (a
-- clock going back never creates capacity). Under another limit a debt
-- above full is cut to full, and the caller stores the cut. See bucketDebt
-- in algorithms/internal/calc/gcra.go.
local function bucket_debt(a, b, rs, now, r, full, same)
  if b ~= 0 and rs ~= r then a, b = a + 1, 0 end
  if a < now then return 0, false end
  local d = a - now
  if same then return d * r + b, false end
  if d > floor(full / r) then return full, true end
  local diff = d * r + b
  if diff > full then return full, true end
  return diff, false
end
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
local check = fixed_window
-- One check, the common case: a script of its own per algorithm, holding
-- only that algorithm, which the Go side joins as prelude, algorithm, a line
-- naming the algorithm's function `check`, then this file.
--
-- KEYS[1]    the storage key
-- KEYS[2]    sharded clients only (Redis Cluster, Ring): the key's pending
--            marker, set while a refund may still give units back
-- KEYS[3]    one part of a call spanning slots only: the call's commit
--            marker in this slot, which its refund consumes; it holds
--            "<now>:<reset_after>", what a cancel (cancel.lua) needs
-- ARGV[1]    now in µs; 0 means the Redis server clock (TIME)
-- ARGV[2..6] capacity, period µs, r, u, cost (as one check of dispatch.lua)
-- ARGV[7]    with KEYS[3]: the refund window in ms
--
-- Reply: allowed (0 denied, 1 allowed, 2 denied while the key's pending
-- marker exists: a refund may still undo the denial), remaining,
-- retry_after µs, reset_after µs, now µs; the fast paths
-- (<algorithm>_one.lua, one_fast.lua) leave out the now when they decide a
-- call without a commit marker (KEYS[3]), whose caller does not use it.
--
-- A check writes only when it is allowed, so one pass that commits is
-- dispatch.lua's two phases for one check. See dispatch.lua for the
-- markers. now.lua, before the algorithm (and before a fast path such as
-- gcra_one.lua), has read now.
server_clock = ARGV[1] == '0'
-- A part whose commit marker exists already was cancelled (see
-- cancel.lua), or is a resend of a part that committed: it decides
-- nothing, and replies a denial its caller no longer reads.
if KEYS[3] and redis.call('EXISTS', KEYS[3]) == 1 then return {0, 0, 0, 0, now} end
local allowed, remaining, retry, reset = check(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), now, true)
if allowed == 1 then
  if KEYS[3] then
    redis.call('SET', KEYS[3], fmt(now) .. ':' .. fmt(reset), 'PX', ARGV[7])
    redis.call('SET', KEYS[2], '1', 'PX', ARGV[7])
  end
elseif KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then
  allowed = 2
end
if remaining < 0 then remaining = 0 end
return {allowed, remaining, retry, reset, now}
