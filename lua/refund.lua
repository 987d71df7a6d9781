-- Refund: gives back, later, units that a decide call which set a commit
-- marker took: "charge after the response", where a request reserves its
-- cost before the work and gives back what the work did not use, seconds
-- after its commit, at the current time. The Go side joins it after the
-- prelude, the algorithm files and calendar.lua.
--
-- KEYS[i], i <= n    the storage key of check i
-- KEYS[n+1]          the decide call's commit marker in this slot
-- ARGV[1]            now in µs; 0 means the Redis server clock (TIME)
-- ARGV[2]            the now the decide call replied: its commit's
-- ARGV[3+7(i-1)...]  per check: algorithm (1 fixed_window ... 5 gcra, 7
--                    calendar; concurrency is released, never refunded),
--                    capacity, period µs, r, u, the units to give back,
--                    and the reset_after µs the commit replied for it
--
-- Reply: 1 if the commit marker existed (deleted: the units were given
-- back), else 0 (refunded already, or the refund window has passed:
-- nothing given back); then the now used, in µs.
--
-- Each <name>_late(key, cap, period, r, u, units, at, reset, now) gives
-- back units that the commit at at took, as they stand at now:
--
--   fixed window    from the count of the commit's window (named by its
--                   end, at + reset), while the key is at that window;
--                   the TTL stays (the window ends when it did)
--   sliding log     that many entries of the commit's stamp (at + reset -
--                   period), while they count; the key then lives while
--                   its newest entry counts
--   sliding window  from the window the commit counted in (it started at
--                   at + reset - 2*period): the current count while the
--                   key is at it, the previous count once the key has
--                   moved on to the next, nothing after that
--   token bucket,   the units' time-debt at now, never below a full
--   GCRA            bucket (the cluster refunds, run at the commit's now)
--
-- algorithms/internal/calc/refund.go is the Go twin, operation for
-- operation.
local function fixed_window_late(key, cap, period, r, u, cost, at, reset)
  fixed_window_refund(key, cap, period, r, u, cost, at, reset)
end

local function sliding_log_late(key, _, period, _, _, cost, at, reset, now)
  local stamp = at + reset - period
  if stamp <= now - period then return end
  local s = fmt(stamp)
  local n = redis.call('ZCOUNT', key, s, s)
  local stop = n - cost
  if stop < 0 then stop = 0 end
  -- members of one stamp are <stamp>:0..n-1; the newest numbers go, so
  -- the rest stay contiguous and the next commit's numbers unique
  local args = {}
  local i = n - 1
  while i >= stop do
    args[#args + 1] = s .. ':' .. fmt(i)
    i = i - 1
    if #args == 200 or i < stop then
      redis.call('ZREM', key, unpack(args))
      args = {}
    end
  end
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then pexpire(key, tonumber(last[2]) + period - now) end
end

local function sliding_window_late(key, _, period, _, _, cost, at, reset, now)
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
  local left = sw_reset(w, period, now, c, p)
  if left <= 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key, 'c', fmt(c), 'p', fmt(p))
  pexpire(key, left)
end

local function token_bucket_late(key, cap, period, r, u, cost, _, _, now)
  token_bucket_refund(key, cap, period, r, u, cost, now)
end

local function gcra_late(key, cap, period, r, u, cost, _, _, now)
  gcra_refund(key, cap, period, r, u, cost, now)
end

local late = {fixed_window_late, sliding_log_late, sliding_window_late, token_bucket_late, gcra_late}
-- 7: a calendar quota, whose state is the fixed window's (calendar.lua)
late[7] = function(key, cap, period, r, u, cost, at, reset)
  calendar_refund(key, cap, period, r, u, cost, at, reset)
end
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local at = tonumber(ARGV[2])
local n = #KEYS - 1
for i = 1, n do
  if not late[tonumber(ARGV[3 + 7 * (i - 1)])] then
    return redis.error_reply('redlimit: unknown algorithm ' .. tostring(ARGV[3 + 7 * (i - 1)]))
  end
end
if redis.call('DEL', KEYS[n + 1]) == 0 then return {0, now} end
for i = 1, n do
  local o = 3 + 7 * (i - 1)
  local units = tonumber(ARGV[o + 5])
  if units > 0 then
    late[tonumber(ARGV[o])](KEYS[i], tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]),
      tonumber(ARGV[o + 4]), units, at, tonumber(ARGV[o + 6]), now)
  end
end
return {1, now}
