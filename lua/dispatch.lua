-- Dispatch: several checks of one request, decided all-or-nothing, or the
-- refund of a decide call. It follows the prelude, every algorithm's
-- functions and now.lua; the recipe fills checks, writes and refunds, each
-- algorithm's functions by its number (from the one list in
-- lua/internal/gen that numbers them).
--
-- ARGV[1]            now in µs; 0 means the Redis server clock (TIME)
-- ARGV[2]            mode: 0 decide, 1 refund, 2 decide on a sharded client
--                    (Redis Cluster, Ring), 3 decide one part of a call
--                    spanning slots
-- ARGV[3+6(i-1)...]  per check (laid out by algorithms/redisstore/args.go,
--                    TestScriptArgs keeps both sides alike): algorithm
--                    (1 fixed_window, 2 sliding_log,
--                    3 sliding_window, 4 token_bucket, 5 gcra,
--                    6 concurrency, 7 calendar),
--                    capacity, period µs, r, u, cost (a calendar check:
--                    capacity, its windows' boundaries s0, s1, s2, cost)
-- ARGV[3+6n]         mode 3 only: the refund window W in ms
-- ARGV[3+6n+(i-1)]   mode 1 only: the reset_after µs that the commit of
--                    check i replied
-- ARGV[3+7n]         mode 1 only: the now that the commit replied, at
--
-- KEYS[i], i <= n    the storage key of check i
-- KEYS[n+i]          modes 2 and 3: check i's pending marker
-- KEYS[2n+1]         mode 3: the call's commit marker in this slot
-- KEYS[n+1]          mode 1: the commit marker of the decide call refunded
--
-- Reply: for each check, four integers: allowed (0 denied, 1 allowed, 2
-- denied while the key's pending marker exists), remaining, retry_after
-- µs, reset_after µs; then one more: the now used, in µs. A decide call
-- with a calendar check whose windows do not hold now replies allowed 3
-- for every check, decides nothing and writes nothing. A refund then
-- replies the positions (from 1) of the checks that found a count they
-- could not tell as the commit's while it still counts (see
-- <name>_refund in prelude.lua), which gave nothing back: none, usually.
--
-- Decide: phase 1 evaluates every check without writing. Only if all pass
-- does phase 2 write the state each left. If any check denies, nothing is
-- written and the passing checks report their state as it is.
--
-- Refund: gives back what a decide call that allowed all its checks
-- consumed, as it stands at now (as refund.lua's late refunds do: a
-- bucket gets back no more of the commit's debt than is left at now), then
-- reports every check's state at now (allowed 1, retry_after 0). Redis
-- Cluster needs it: the checks of one request whose keys live in different
-- hash slots run as one decide call per slot, and when one slot denies or
-- fails, the slots that committed are refunded (see algorithms.Redis), at
-- once or, after a failure, in the background. Until 2026-12 this ran at
-- the commit's own now (ARGV[1] was at): a refund sent after the caller's
-- deadline then gave a bucket back its whole cost, including the part the
-- refill had already returned (cluster seeds 967 and 972 of the chaos
-- harness: a token bucket one unit over its limit).
--
-- Markers (sharded clients only; keys of the slot of the checks, with a
-- TTL of W): a part that commits (mode 3) sets its commit marker, to
-- "<now>:<reset_after 1>:...:<reset_after n>|<record 1>...|<record n>"
-- (what a refund and cancel.lua need to give the units back; the records:
-- see refund_mark, prelude.lua), and every check's pending marker, to "1". A part
-- whose commit marker exists when it runs decides nothing (cancelled). A refund gives back only if it deletes
-- the commit marker: at most once, and only within W of its commit. A
-- check denied while its pending marker exists (modes 2 and 3) replies
-- allowed 2: a refund may still give back units that the denial counted.
-- A denial replied 0 can never be undone by a refund: every commit whose
-- marker is still live has set the pending marker since (with the same
-- TTL), so none is.
local checks, writes, refunds = ${checks}, ${writes}, ${refunds}
local mode = ARGV[2]
local n = #KEYS
local server = ARGV[1] == '0'
if mode == '1' then
  n = n - 1
elseif mode == '2' then
  n = n / 2
elseif mode == '3' then
  n = (n - 1) / 2
end

-- args returns check i's algorithm and its parameters after the key.
local function args(i)
  local o = 3 + (i - 1) * 6
  local alg = tonumber(ARGV[o])
  if not checks[alg] then return nil end
  return alg, tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2]), tonumber(ARGV[o + 3]),
    tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5])
end

local function unknown(i)
  return redis.error_reply('redlimit: unknown algorithm ' .. tostring(ARGV[3 + (i - 1) * 6]))
end

-- eval evaluates check i without writing; peek reads its state without
-- consuming (a cost that can never fit is never allowed, and reports the
-- remaining and reset as they are).
local function eval(i, peek)
  local alg, cap, period, r, u, cost = args(i)
  if not alg then return unknown(i) end
  if peek then cost = cap + 1 end
  return checks[alg](KEYS[i], cap, period, r, u, cost, now, false, server)
end

local reply = {}
if mode == '1' then
  for i = 1, n do
    if not args(i) then return unknown(i) end
  end
  local m = redis.call('GET', KEYS[n + 1])
  local missed = {}
  if m then
    redis.call('DEL', KEYS[n + 1])
    local marks = commit_marks(m)
    local at = tonumber(ARGV[3 + 7 * n])
    for i = 1, n do
      local alg, cap, period, r, u, cost = args(i)
      if refunds[alg](KEYS[i], cap, period, r, u, cost, at, tonumber(ARGV[2 + 6 * n + i]), now, marks[i], server) then
        missed[#missed + 1] = i
      end
    end
  end
  for i = 1, n do
    local _, remaining, _, reset = eval(i, true)
    if remaining < 0 then remaining = 0 end
    local o = (i - 1) * 4
    reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4] = 1, remaining, 0, reset
  end
  reply[4 * n + 1] = now
  for j = 1, #missed do reply[4 * n + 1 + j] = missed[j] end
  return reply
end

-- A call that decides nothing replies, for every check, allowed `still`
-- and zeros, then the now: 3 when a calendar check's (7) windows do not
-- hold now (see calendar.lua); 0 for a part whose commit marker exists
-- already, cancelled (cancel.lua) or a resend of a part that committed.
local still
for i = 1, n do
  local o = 3 + (i - 1) * 6
  if ARGV[o] == '7' and calendar_outside(now, tonumber(ARGV[o + 2]), tonumber(ARGV[o + 4])) then
    still = 3
    break
  end
end
if not still and mode == '3' and redis.call('EXISTS', KEYS[2 * n + 1]) == 1 then still = 0 end
if still then
  for j = 1, n do
    reply[4 * j - 3], reply[4 * j - 2], reply[4 * j - 1], reply[4 * j] = still, 0, 0, 0
  end
  reply[4 * n + 1] = now
  return reply
end

-- Phase 1 keeps, for each passing check, what its write needs; phase 2
-- writes without reading the keys again (no two checks of a call share a
-- key: the Go side rejects such calls).
local all = true
local pending = {}
for i = 1, n do
  local out = {eval(i, false)}
  if type(out[1]) == 'table' then return out[1] end
  if out[1] == 0 then all = false end
  pending[i] = out
  local o = (i - 1) * 4
  reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4] = out[1], out[2], out[3], out[4]
end
for i = 1, n do
  local o = (i - 1) * 4
  if all then
    writes[tonumber(ARGV[3 + (i - 1) * 6])](KEYS[i], unpack(pending[i], 5))
  elseif reply[o + 1] == 1 then
    -- nothing is consumed: a passing check reports its state as it is
    local _, remaining, _, reset = eval(i, true)
    reply[o + 2], reply[o + 4] = remaining, reset
  end
  if reply[o + 2] < 0 then reply[o + 2] = 0 end
  if reply[o + 1] == 0 and mode ~= '0' and redis.call('EXISTS', KEYS[n + i]) == 1 then
    reply[o + 1] = 2
  end
end
if all and mode == '3' then
  local w = ARGV[3 + 6 * n]
  local commit = {fmt(now)}
  for i = 1, n do commit[i + 1] = fmt(reply[4 * i]) end
  local marks = {}
  for i = 1, n do marks[i] = bucket_mark(ARGV[3 + (i - 1) * 6], KEYS[i]) end
  redis.call('SET', KEYS[2 * n + 1], table.concat(commit, ':') .. table.concat(marks), 'PX', w)
  for i = 1, n do
    redis.call('SET', KEYS[n + i], '1', 'PX', w)
  end
end
reply[4 * n + 1] = now
return reply
