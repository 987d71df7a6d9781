-- batch_sliding_log.lua: generated from the sources in lua/ by
-- go test ./lua -run TestScriptFiles -update; do not edit.
--
-- Decides several queued calls whose checks are all sliding_log, one after
-- another, each exactly as its own script would alone, in one EVALSHA.
--
-- KEYS:
--   for each call in turn: its n storage keys; on a sharded client their
--   pending markers; for a part of a call spanning slots, its commit marker
-- ARGV:
--   for each call in turn: n (0: one check with the numbers of the last
--   call of one check), now (0: TIME), mode (0 one server, 2 sharded, 3 a
--   part of a call spanning slots), 6 numbers per check (algorithm,
--   capacity, period µs, r, u, cost), and in mode 3 the refund window in ms
-- Reply:
--   for each call in turn, 4 integers per check as one.lua/dispatch.lua
--   reply them (-1 and zeros: the call raised an error and is run alone),
--   then the now for a call of several checks or in mode 3
--
-- SHA1 69118d6f63f58129939bb46a283c49278c3f79f9 (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from these sections of lua/, in order (<file>.<section>, or a
-- whole <file>), their formulas inlined where they say --@ inline:
--   batch_state, prelude, fast, sliding_log, batch
-- ---- the script, as sent ----
-- The state of a batch script (see batch.lua), declared before anything
-- else so that a flat loop (batch_gcra.lua, batch_fast.lua) can decide the
-- calls at the head of the batch before any function is defined, other
-- than call_now and flush below and the fast function batch_fast.lua
-- calls: t is the server's TIME once read, reply the reply, tats, dirty
-- and order the GCRA TATs read and not yet written (see batch.lua), k, a,
-- o where the next call's KEYS, ARGV and reply start, and last where the
-- numbers of the last call of one check start in ARGV (a call with n = 0
-- reuses them).
local t
local reply = {}
local tats, dirty, order = {}, {}, {}
local k, a, o, last = 1, 1, 0, 0

-- call_now returns the now of a call whose ARGV now is s: s as a number,
-- or for '0' the server's clock, read once per script (every call on the
-- server clock shares one TIME).
local function call_now(s)
  if s ~= '0' then return tonumber(s) end
  if not t then
    local tt = redis.call('TIME')
    t = tonumber(tt[1]) * 1000000 + tonumber(tt[2])
  end
  return t
end

-- flush writes the GCRA TATs of dirty, in order, and forgets every TAT
-- read (see batch.lua).
local function flush()
  for i = 1, #order do
    local key = order[i]
    redis.call('SET', key, tats[key], 'PX', dirty[key])
  end
  tats, dirty, order = {}, {}, {}
end
-- redlimit's scripts: each is this prelude, the functions of one or all of
-- the algorithm files, then an entry point. one.lua decides one check (the
-- common case) with the script of that check's algorithm; dispatch.lua
-- decides several checks all-or-nothing, or refunds, with the script
-- holding all of them; batch.lua decides several queued calls, one after
-- another.
--
-- Every algorithm file defines three functions; the first and the last
-- take the same parameters, of which each uses what it needs:
--
--   <name>(key, cap, period, r, u, cost, now, commit, server)
--     evaluates a check of cost units at now (µs), and returns four
--     integers: allowed (0/1), remaining, retry_after µs, reset_after µs,
--     then the arguments after key of <name>_write, and writes them itself
--     (calls <name>_write) if commit is true and the check passes.
--   <name>_write(key, ...)
--     writes the state a passing check left, with its TTL. The dispatch
--     calls it once every check of a request has passed, without reading
--     the keys again.
--   <name>_refund(key, cap, period, r, u, cost, at, reset, now, mark, server)
--     gives back cost units that a commit at at, which replied
--     reset_after = reset, took, as they stand at now, the time the
--     refund runs (on the server's clock, its present: never at): right
--     after the commit (Redis Cluster compensation, dispatch.lua; a
--     cancel, cancel.lua) or later (charge after the response,
--     refund.lua); mark is the key's refund record as the commit noted it
--     (see refund_mark below; the token bucket and GCRA use it). It
--     returns true when it found a count it could not tell as the
--     commit's while the commit's units still count (only the fixed
--     window's string, whose window is named by its TTL, can), having
--     given nothing back: the entry points reply which checks did, and
--     the Go side reports them.
--
-- cap is the capacity in units, period the window or refill period in µs;
-- token_bucket and gcra refill r scaled units per µs, one unit being u
-- scaled units, so every refill is an exact integer. server is true when
-- now is the server's clock (TIME), which is also the clock of TTLs: the
-- entry points pass it, from ARGV (a now of 0).
--
-- A key's state expires when it would read as a full bucket: its TTL is
-- reset_after rounded up to the ms, so a key that expires is
-- indistinguishable from a key at full capacity. A token bucket or GCRA
-- key written on a clock other than the server's (an injected now) lives
-- a second longer: see bucket_ttl in gcra.lua.
--
-- Numbers are float64: every integer here stays below 2^53 (the Go side
-- validates limits so that it does), and every number sent back to Redis is
-- formatted with %.0f (or %d where that is exact, see lua/doc.go) so no
-- exponent notation reaches a key.
--
-- The arithmetic of each algorithm is written once, in its own file, as
-- formulas that the scripts inline (see lua/doc.go); this file holds what
-- the algorithms share and does no algorithm's arithmetic.

local floor = math.floor

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

-- A late refund of bucket units (token bucket, GCRA) moves the debt of
-- every commit after the refunded one earlier: those commits' own
-- horizons (at + reset) are then that much too late, and a later refund
-- measured against its original horizon would give back units the refill
-- has already returned. So each refund adds what it gave back, in µs, to
-- the key's refund record, the sibling refunded_key(key):
--
--   "<g>,<R>" then ";<lo>,<hi>,<give>,<H>" per run of refunds kept
--
-- R is the µs given back since the record was created at g (µs); it lives
-- tau (a full bucket's µs) after the last refund, past which every commit
-- it could concern has reached its horizon. A commit that may be refunded
-- notes "<g>,<R>" as it finds it ("|<g>,<R>" or "|-" per check, after the
-- resets of its commit marker: refund_mark), and its refund takes off its
-- horizon what refunds of earlier commits gave back since (refund_since):
-- R less the R it noted, less what the refunds of later commits gave back.
-- Those are told apart by V = at + reset + (the R the commit noted): in
-- the order of commits V grows by at least each commit's cost (the
-- refunds before a commit are added back), and the rounding up of reset
-- and of each give cannot reorder two commits. The record keeps, sorted
-- by V, runs ";<lo>,<hi>,<give>,<H>": refunded commits of V from lo to
-- hi, what they gave back, and the horizon H = at + reset of the lowest,
-- until H has passed (no commit before it has debt left). A run counts as
-- later for a commit below lo. Past refund_keep runs, the two closest in
-- V become one: refunded commits next to each other (no commit between:
-- their V differ by the upper's cost) merge with nothing lost, and a
-- commit outstanding between two runs keeps them apart (its cost widens
-- the gap). A refund not counted as later counts as one of an earlier
-- commit: less is given back, never more. calc's RefundRecord is the Go
-- twin.

-- refund_keep bounds the refunds a record keeps.
local refund_keep = 32

-- refunded_key returns key's refund record, in key's hash slot (as the Go
-- side's sibling names it), or nil for a key with braces but no hash tag
-- (Go places such siblings with a tag a script cannot compute: those keys
-- go without a record, and a second late refund may still give back what
-- the refill returned).
local function refunded_key(key)
  local i = string.find(key, '{', 1, true)
  if i then
    local j = string.find(key, '}', i + 1, true)
    if j and j > i + 1 then return key .. ':rf' end
  elseif key ~= '' and not string.find(key, '}', 1, true) then
    return '{' .. key .. '}:rf'
  end
  return nil
end

-- refund_mark returns "|" and key's refund record's "<g>,<R>" as a commit
-- finds it ("-" when there is none), for its commit marker.
local function refund_mark(key)
  local k = refunded_key(key)
  local v = k and redis.call('GET', k)
  return '|' .. ((v and string.match(v, '^%d+,%d+')) or '-')
end

-- bucket_mark is refund_mark for a check of algorithm alg (its number, as
-- ARGV sends it): only the token bucket (4) and GCRA (5) keep a record,
-- the others note "|-" without reading one.
local function bucket_mark(alg, key)
  if alg == '4' or alg == '5' then return refund_mark(key) end
  return '|-'
end

-- commit_marks returns the records a commit marker m noted, one per check
-- (a marker of a release before the record noted none: its checks' marks
-- are nil, which refund_since reads as every refund being earlier).
local function commit_marks(m)
  local t = {}
  for s in string.gmatch(m, '|([^|]*)') do t[#t + 1] = s end
  return t
end

-- refund_since returns the µs that refunds of earlier commits gave back to
-- key's debt after the commit at at that replied reset and noted mark,
-- then the record as read, for refund_add: its g and R (nil: none), its
-- runs kept, and this commit's V and H.
local function refund_since(key, mark, at, reset)
  local rec = {k = refunded_key(key), vx = at + reset, hx = at + reset}
  local v = rec.k and redis.call('GET', rec.k)
  local g, R = string.match(v or '', '^(%d+),(%d+)')
  if not g then return 0, rec end
  rec.g, rec.R = tonumber(g), tonumber(R)
  local since = rec.R
  local mg, mR = string.match(mark or '', '^(%d+),(%d+)$')
  if mg and tonumber(mg) == rec.g then
    since = rec.R - tonumber(mR)
    rec.vx = rec.vx + tonumber(mR)
  end
  for lo, hi, give, h in string.gmatch(v, ';(%d+),(%d+),(%d+),(%d+)') do
    lo, give = tonumber(lo), tonumber(give)
    rec[#rec + 1] = {lo, tonumber(hi), give, tonumber(h)}
    -- a marker of a release before the record (mark nil) noted nothing:
    -- every refund the record holds counts as one of an earlier commit
    if mark and lo > rec.vx then since = since - give end
  end
  return math.max(0, since), rec
end

-- refund_add adds to key's refund record (rec, as refund_since returned
-- it) a refund at now that gave back us µs; the record then lives tau µs
-- (and 1 ms).
local function refund_add(rec, us, now, tau)
  if not rec.k or us <= 0 then return end
  local g, R = rec.g, rec.R
  if not g then g, R = now, 0 end
  local keep = {}
  local new = {rec.vx, rec.vx, us, rec.hx}
  for _, e in ipairs(rec) do
    if new and e[1] > new[1] then
      keep[#keep + 1] = new
      new = nil
    end
    if e[4] > now then keep[#keep + 1] = e end
  end
  if new then keep[#keep + 1] = new end
  if #keep > refund_keep then
    -- the two neighbours closest in V become one run (V from the lower's
    -- to the upper's): the commits below both still count both as later,
    -- those between, if any, neither
    local j = 1
    for i = 2, #keep - 1 do
      if keep[i + 1][1] - keep[i][2] < keep[j + 1][1] - keep[j][2] then j = i end
    end
    local a, b = keep[j], keep[j + 1]
    keep[j] = {a[1], math.max(a[2], b[2]), a[3] + b[3], a[4]}
    table.remove(keep, j + 1)
  end
  local out = {fmt(g) .. ',' .. fmt(R + us)}
  for _, e in ipairs(keep) do
    out[#out + 1] = fmt(e[1]) .. ',' .. fmt(e[2]) .. ',' .. fmt(e[3]) .. ',' .. fmt(e[4])
  end
  redis.call('SET', rec.k, table.concat(out, ';'), 'PX', fmt(ceil_div(tau, 1000) + 1))
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
-- intf formats the integers that the flat fast paths (<algorithm>_one.lua,
-- batch.lua) write: '%d', which is faster, where Lua's C long holds 2^53,
-- else '%.0f'; both write an integer below 2^53 alike.
local intf = string.format('%d', 9007199254740992) == '9007199254740992' and '%d' or '%.0f'
-- Sliding log: sorted set, one member per unit, score = µs. An entry at s
-- counts while s > now - period. Members are "<score>:<n>" where n counts the
-- members already at that score: entries leave by score range, so all
-- members of one score leave together and n never repeats. New entries are
-- stamped max(now, newest) so a clock that goes back cannot expire them early.
-- sliding_log_write adds cost entries stamped stamp and drops those that
-- left the window at now.
local function sliding_log_write(key, stamp, cost, period, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now - period))
  local s = fmt(stamp)
  zadd_units(key, s, s, redis.call('ZCOUNT', key, s, s), cost)
  pexpire(key, stamp + period - now)
end

local function sliding_log(key, cap, period, _, _, cost, now, commit)
  local from = '(' .. fmt(now - period)
  local count = redis.call('ZCOUNT', key, from, '+inf')
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local newest = tonumber(last[2])
  local reset = 0
  if count > 0 then reset = newest + period - now end
  if cost > cap then return 0, cap - count, 0, reset end
  if count + cost > cap then
    -- the (count+cost-cap)-th oldest entry in the window must leave it
    local k = count + cost - cap
    local e = redis.call('ZRANGEBYSCORE', key, from, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
    -- the entries count until reset under this limit: the TTL follows, or
    -- after a change to a longer period the TTL the last commit set would
    -- drop them before the retry_after replied
    pexpire(key, reset)
    return 0, cap - count, tonumber(e[2]) + period - now, reset
  end
  local stamp = now
  if newest and newest > stamp then stamp = newest end
  if commit then sliding_log_write(key, stamp, cost, period, now) end
  return 1, cap - count - cost, 0, stamp + period - now, stamp, cost, period, now
end

-- Refund: remove cost members of the stamp the commit at at used, named
-- by its reply reset = stamp + period - at, while they count at now.
-- Members of one stamp are all alike and numbered <stamp>:0..n-1; the
-- newest cost numbers go, so the rest stay contiguous and the next commit's
-- numbers (starting at the count) stay unique. The key then lives while
-- its newest entry counts.
local function sliding_log_refund(key, _, period, _, _, cost, at, reset, now)
  local stamp = at + reset - period
  if stamp <= now - period then return end
  local s = fmt(stamp)
  local n = redis.call('ZCOUNT', key, s, s)
  local stop = n - cost
  if stop < 0 then stop = 0 end
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
-- Batch: several decide calls, queued behind the round trips in flight,
-- decided in one script, one call after another. It follows
-- batch_state.lua, a flat loop (see the end of this header) with what it
-- needs, the prelude, fast.lua, the algorithms' functions and fast
-- functions (their sections functions and fast), each once, and GCRA's
-- batch calls (gcra.lua's section batch_calls) in the scripts that hold
-- GCRA; the recipe fills checks, writes and fasts (the algorithms'
-- functions by number, as in dispatch.lua: only the script's own
-- algorithm in a batch of one algorithm, all of them in a mixed batch) and
-- gcra_call (nil in a script without GCRA).
--
-- ARGV, for each call in turn:
--   n                  its number of checks; 0 for one check whose 6
--                      numbers are those of the last call of one check
--                      (modes 0 and 2 only): they are not sent again
--   now                in µs; 0 means the Redis server clock (TIME)
--   mode               0 one server, 2 a sharded client (Redis Cluster,
--                      Ring), 3 one part of a call spanning slots (as
--                      dispatch.lua's modes)
--   6 per check        algorithm (1 fixed_window ... 5 gcra), capacity,
--                      period µs, r, u, cost
--   mode 3 only        the refund window in ms
-- KEYS, for each call in turn: its n storage keys; modes 2 and 3: their
-- pending markers; mode 3: the call's commit marker (as dispatch.lua's).
--
-- Reply, for each call in turn, 4n integers, then the now for a call of
-- several checks or in mode 3 (the Go side uses it only then): the call's
-- reply as dispatch.lua's decide would give it (one.lua's for one check:
-- the same integers), or -1 and zeros when the call raised an error (a
-- key of another type, state it cannot read): the Go side then runs the
-- call's own script alone, which replies the error itself. Each value
-- replied costs the server, as each argument does.
--
-- Each call is decided exactly as its own script (one.lua for one check,
-- dispatch.lua for several) would decide it alone at that point:
-- atomically (a script runs alone) and all-or-nothing, writing only when
-- every check of the call passes, so a denied call charges nothing and
-- does not stop the calls after it. Calls on the server clock share one
-- TIME, read when the first of them is decided. Every key of a batch is
-- in one hash slot (the Go side groups calls by slot on a cluster).
--
-- batch_state.lua declares the state (t, reply, tats, dirty, order, and
-- k, a, o, where the next call starts), before the rest; in the scripts
-- that hold GCRA, gcra.lua's section batch then decides the GCRA calls at
-- the head of the batch, flat, in the batch scripts of fixed_window,
-- sliding_window and token_bucket batch_fast.lua the one-check calls
-- through the algorithm's fast function, and this file goes on from the
-- first call they left.
local checks, writes, fasts, gcra_call = {[2] = sliding_log}, {[2] = sliding_log_write}, {}, nil

-- decide decides the call of n checks whose first key is KEYS[k] and first
-- check's ARGV starts at ARGV[a], and writes its 4n integers at reply[o+1].
local function decide(n, now, mode, k, a, o, server)
  -- a part whose commit marker exists already was cancelled (cancel.lua),
  -- or is a resend of a part that committed: it decides nothing
  if mode == 3 and redis.call('EXISTS', KEYS[k + 2 * n]) == 1 then
    for i = o + 1, o + 4 * n do reply[i] = 0 end
    return
  end
  if n == 1 then
    local allowed, remaining, retry, reset = checks[tonumber(ARGV[a])](KEYS[k], tonumber(ARGV[a + 1]),
      tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), now, true, server)
    if allowed == 1 then
      if mode == 3 then
        local w = ARGV[a + 6]
        redis.call('SET', KEYS[k + 2], fmt(now) .. ':' .. fmt(reset) .. bucket_mark(ARGV[a], KEYS[k]), 'PX', w)
        redis.call('SET', KEYS[k + 1], '1', 'PX', w)
      end
    elseif mode ~= 0 and redis.call('EXISTS', KEYS[k + 1]) == 1 then
      allowed = 2
    end
    if remaining < 0 then remaining = 0 end
    reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4] = allowed, remaining, retry, reset
    return
  end
  -- several checks: dispatch.lua's decide
  local all = true
  local pending = {}
  for i = 1, n do
    local c = a + 6 * (i - 1)
    local out = {checks[tonumber(ARGV[c])](KEYS[k + i - 1], tonumber(ARGV[c + 1]), tonumber(ARGV[c + 2]),
      tonumber(ARGV[c + 3]), tonumber(ARGV[c + 4]), tonumber(ARGV[c + 5]), now, false, server)}
    if out[1] == 0 then all = false end
    pending[i] = out
    local p = o + (i - 1) * 4
    reply[p + 1], reply[p + 2], reply[p + 3], reply[p + 4] = out[1], out[2], out[3], out[4]
  end
  for i = 1, n do
    local c = a + 6 * (i - 1)
    local p = o + (i - 1) * 4
    if all then
      writes[tonumber(ARGV[c])](KEYS[k + i - 1], unpack(pending[i], 5))
    elseif reply[p + 1] == 1 then
      -- nothing is consumed: a passing check reports its state as it is
      local cap = tonumber(ARGV[c + 1])
      local _, remaining, _, reset = checks[tonumber(ARGV[c])](KEYS[k + i - 1], cap, tonumber(ARGV[c + 2]),
        tonumber(ARGV[c + 3]), tonumber(ARGV[c + 4]), cap + 1, now, false, server)
      reply[p + 2], reply[p + 4] = remaining, reset
    end
    if reply[p + 2] < 0 then reply[p + 2] = 0 end
    if reply[p + 1] == 0 and mode ~= 0 and redis.call('EXISTS', KEYS[k + n + i - 1]) == 1 then
      reply[p + 1] = 2
    end
  end
  if all and mode == 3 then
    local w = ARGV[a + 6 * n]
    local commit = {fmt(now)}
    for i = 1, n do commit[i + 1] = fmt(reply[o + 4 * i]) end
    local marks = {}
    for i = 1, n do marks[i] = bucket_mark(ARGV[a + 6 * (i - 1)], KEYS[k + i - 1]) end
    redis.call('SET', KEYS[k + 2 * n], table.concat(commit, ':') .. table.concat(marks), 'PX', w)
    for i = 1, n do
      redis.call('SET', KEYS[k + n + i - 1], '1', 'PX', w)
    end
  end
end

-- one decides the call of n checks whose first key is KEYS[k] and first
-- check's ARGV starts at ARGV[a], at reply[o+1]: calls of GCRA checks
-- through gcra_call, one-check calls of the other algorithms that have a
-- flat fast path (fasts, by number) through it, when they decide them.
local function one(n, now, mode, k, a, o, server)
  if mode ~= 3 then
    local alg = tonumber(ARGV[a])
    local gcra = alg == 5
    for i = 2, n do
      if ARGV[a + 6 * (i - 1)] ~= '5' then gcra = false end
    end
    if gcra and gcra_call then
      if gcra_call(n, now, mode, k, a, o, server) then return end
    elseif n == 1 and fasts[alg] then
      if tats[KEYS[k]] ~= nil then flush() end
      local allowed, remaining, retry, reset = fasts[alg](KEYS[k], a + 1, now, server)
      if allowed then
        if allowed ~= 1 and mode == 2 and redis.call('EXISTS', KEYS[k + 1]) == 1 then allowed = 2 end
        if remaining < 0 then remaining = 0 end
        reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4] = allowed, remaining, retry, reset
        return
      end
    end
  end
  if #order > 0 or next(tats) then flush() end
  decide(n, now, mode, k, a, o, server)
end

while a <= #ARGV do
  local n, now, mode = tonumber(ARGV[a]), call_now(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local server = ARGV[a + 1] == '0'
  -- c: where the call's checks' numbers are in ARGV
  local c = a + 3
  if n == 0 then
    n, c = 1, last
    a = a - 6 -- none sent
  elseif n == 1 then
    last = c
  end
  if not pcall(one, n, now, mode, k, c, o, server) then
    reply[o + 1] = -1
    for i = o + 2, o + 4 * n do reply[i] = 0 end
  end
  if n > 1 or mode == 3 then
    reply[o + 4 * n + 1] = now
    o = o + 1
  end
  a = a + 3 + 6 * n
  if mode == 3 then a = a + 1 end
  k = k + n
  if mode ~= 0 then k = k + n end
  if mode == 3 then k = k + 1 end
  o = o + 4 * n
end
flush()
return reply
