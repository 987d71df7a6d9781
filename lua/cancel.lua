-- Cancel: settles one part of a call spanning slots (Redis Cluster, Ring)
-- whose caller never learned whether it committed: its deadline ended
-- first, or its connection broke in the middle of the reply. Without it,
-- such a part that had committed would keep the units of a request that
-- was never served (a route rule shared by every client drained by the
-- calls that timed out). It follows the prelude, the algorithms'
-- functions, now.lua and unknown.lua; the recipe fills undo, each
-- algorithm's <name>_refund by its number, as refund.lua's late.
--
-- KEYS[i], i <= n    the storage key of check i
-- KEYS[n+1]          the part's commit marker
-- ARGV[1]            now in µs; 0 means the Redis server clock (TIME)
-- ARGV[2]            W, the commit marker's TTL in ms (as the part's)
-- ARGV[3+6(i-1)...]  per check, as the part sent it: algorithm, capacity,
--                    period µs, r (a concurrency check: its lease), u,
--                    cost
--
-- Reply: 0 if the part had not run (the marker is set to "x" for W, so
-- that the part, if it still runs, decides nothing: see one.lua,
-- dispatch.lua, batch.lua), 1 if it had committed and its units are now
-- given back (and the marker set to "x": at most once), 2 if it had been
-- cancelled already or had committed before markers held its commit's
-- figures; then the now used, in µs. 3 if it had committed and some
-- checks found a count they could not tell as its commit's while it
-- still counts (see <name>_refund in prelude.lua): the now, then the
-- positions (from 1) of those checks, which gave nothing back.
--
-- The commit marker of a part that committed holds "<at>:<reset_after
-- 1>:...|<record 1>...": each check gives back its cost as refund.lua's
-- late refunds do (<name>_refund(key, cap, period, r, u, cost, at, reset,
-- now, mark)), and a concurrency check removes its slots.
local undo = ${undo}
local server = ARGV[1] == '0'
local n = #KEYS - 1
local unknown = unknown_algorithm(undo, n, 6)
if unknown then return unknown end
local m = redis.call('GET', KEYS[n + 1])
redis.call('SET', KEYS[n + 1], 'x', 'PX', ARGV[2])
if not m then return {0, now} end
local at = string.match(m, '^(%d+)')
if not at then return {2, now} end
local resets = {}
for r in string.gmatch(string.sub(m, #at + 1), ':(%d+)') do resets[#resets + 1] = tonumber(r) end
if #resets ~= n then return {2, now} end
at = tonumber(at)
local marks = commit_marks(m)
local reply = {1, now}
for i = 1, n do
  local o = 3 + 6 * (i - 1)
  if undo[tonumber(ARGV[o])](KEYS[i], tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]),
      tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5]), at, resets[i], now, marks[i], server) then
    reply[1], reply[#reply + 1] = 3, i
  end
end
return reply
