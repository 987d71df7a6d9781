-- Refund: gives back, later, units that a decide call which set a commit
-- marker took: "charge after the response", where a request reserves its
-- cost before the work and gives back what the work did not use, seconds
-- after its commit, at the current time. The Go side joins it after the
-- prelude, the algorithm files, calendar.lua and now.lua.
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
-- Each <name>_refund(key, cap, period, r, u, units, at, reset, now) (see
-- prelude.lua) gives back units that the commit at at took, as they stand
-- at now:
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
local late = {fixed_window_refund, sliding_log_refund, sliding_window_refund, token_bucket_refund, gcra_refund}
late[7] = calendar_refund
local at = tonumber(ARGV[2])
local n = #KEYS - 1
for i = 1, n do
  if not late[tonumber(ARGV[3 + 7 * (i - 1)])] then
    return redis.error_reply('redlimit: unknown algorithm ' .. tostring(ARGV[3 + 7 * (i - 1)]))
  end
end
-- a cancelled part's marker ("x", cancel.lua) gave nothing: it is no commit
local m = redis.call('GET', KEYS[n + 1])
if not m or m == 'x' then return {0, now} end
redis.call('DEL', KEYS[n + 1])
for i = 1, n do
  local o = 3 + 7 * (i - 1)
  local units = tonumber(ARGV[o + 5])
  if units > 0 then
    late[tonumber(ARGV[o])](KEYS[i], tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]),
      tonumber(ARGV[o + 4]), units, at, tonumber(ARGV[o + 6]), now)
  end
end
return {1, now}
