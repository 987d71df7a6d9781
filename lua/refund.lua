-- Refund: gives back, later, units that a decide call which set a commit
-- marker took: "charge after the response", where a request reserves its
-- cost before the work and gives back what the work did not use, seconds
-- after its commit, at the current time. It follows the prelude, the
-- algorithms' functions, now.lua and unknown.lua; the recipe fills late,
-- each algorithm's <name>_refund by its number (concurrency's left out).
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
-- nothing given back); then the now used, in µs. 2 when the marker
-- existed (deleted) but some checks found a count they could not tell as
-- their commit's while it still counts (see <name>_refund in prelude.lua):
-- the now, then the positions (from 1) of those checks, which gave
-- nothing back.
--
-- Each <name>_refund(key, cap, period, r, u, units, at, reset, now, mark)
-- (see prelude.lua) gives back units that the commit at at took, as they
-- stand at now (mark: the refund record the commit noted in its marker):
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
--   GCRA            bucket, nor more than what is left at now of the
--                   commit's debt (at + reset - since - now: the units the
--                   bucket refilled since are not given back again, and
--                   since, what refunds of the key gave back after the
--                   commit, moved its debt earlier; see refund_since in
--                   prelude.lua); dispatch.lua's refund mode (the
--                   compensation of a call spanning slots) alike
--
-- calc's State.Refund is the Go twin, operation for operation.
local late = ${late}
local server = ARGV[1] == '0'
local at = tonumber(ARGV[2])
local n = #KEYS - 1
local unknown = unknown_algorithm(late, n, 7)
if unknown then return unknown end
-- a cancelled part's marker ("x", cancel.lua) gave nothing: it is no commit
local m = redis.call('GET', KEYS[n + 1])
if not m or m == 'x' then return {0, now} end
redis.call('DEL', KEYS[n + 1])
local marks = commit_marks(m)
local reply = {1, now}
for i = 1, n do
  local o = 3 + 7 * (i - 1)
  local units = tonumber(ARGV[o + 5])
  if units > 0 and late[tonumber(ARGV[o])](KEYS[i], tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]),
      tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4]), units, at, tonumber(ARGV[o + 6]), now, marks[i], server) then
    reply[1], reply[#reply + 1] = 2, i
  end
end
return reply
