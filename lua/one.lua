-- One check, the common case: a script of its own per algorithm, holding
-- only that algorithm: the prelude, the algorithm's functions, then this
-- file, in which the script's recipe names the algorithm's function
-- (check) and its number (alg, as ARGV sends it to dispatch.lua).
--
-- KEYS[1]    the storage key
-- KEYS[2]    sharded clients only (Redis Cluster, Ring): the key's pending
--            marker, set while a refund may still give units back
-- KEYS[3]    one part of a call spanning slots only: the call's commit
--            marker in this slot, which its refund consumes; it holds
--            "<now>:<reset_after>|<record>", what a refund or a cancel
--            (cancel.lua) needs (the record: see refund_mark, prelude.lua)
-- ARGV[1]    now in µs; 0 means the Redis server clock (TIME)
-- ARGV[2..6] capacity, period µs, r, u, cost (as one check of dispatch.lua)
-- ARGV[7]    with KEYS[3]: the refund window in ms
--
-- Reply: allowed (0 denied, 1 allowed, 2 denied while the key's pending
-- marker exists: a refund may still undo the denial), remaining,
-- retry_after µs, reset_after µs, now µs; the fast paths
-- (the algorithms' flat heads, one_fast.lua) leave out the now when they decide a
-- call without a commit marker (KEYS[3]), whose caller does not use it.
--
-- A check writes only when it is allowed, so one pass that commits is
-- dispatch.lua's two phases for one check. See dispatch.lua for the
-- markers. now.lua, before the algorithm (and before a fast path such as
-- GCRA's, gcra.lua's section one), has read now.
local check, alg = ${check}, '${id}'
local server = ARGV[1] == '0'
-- A part whose commit marker exists already was cancelled (see
-- cancel.lua), or is a resend of a part that committed: it decides
-- nothing, and replies a denial its caller no longer reads.
if KEYS[3] and redis.call('EXISTS', KEYS[3]) == 1 then return {0, 0, 0, 0, now} end
local allowed, remaining, retry, reset = check(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]),
  tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), now, true, server)
if allowed == 1 then
  if KEYS[3] then
    redis.call('SET', KEYS[3], fmt(now) .. ':' .. fmt(reset) .. bucket_mark(alg, KEYS[1]), 'PX', ARGV[7])
    redis.call('SET', KEYS[2], '1', 'PX', ARGV[7])
  end
elseif KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then
  allowed = 2
end
if remaining < 0 then remaining = 0 end
return {allowed, remaining, retry, reset, now}
