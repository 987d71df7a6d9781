-- batch_all.lua: generated from the sources in lua/ by
-- go test ./lua -run TestScriptFiles -update; do not edit.
--
-- Decides several queued calls of any algorithms, as batch_<algorithm>
-- does: it holds all of them, so a queue of mixed calls costs one script.
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
-- SHA1 c4c2aeb81352e92ec57c7a18de2d7bf489bfcb8f (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from these sections of lua/, in order (<file>.<section>, or a
-- whole <file>), their formulas inlined where they say --@ inline:
--   batch_state, fast, gcra.batch, prelude, fixed_window.string,
--   fixed_window.functions, sliding_log, sliding_window.functions,
--   gcra.bucket, token_bucket.functions, gcra.functions,
--   concurrency.functions, fixed_window.fast, sliding_window.fast,
--   token_bucket.fast, gcra.batch_calls, batch
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
-- intf formats the integers that the flat fast paths (<algorithm>_one.lua,
-- batch.lua) write: '%d', which is faster, where Lua's C long holds 2^53,
-- else '%.0f'; both write an integer below 2^53 alike.
local intf = string.format('%d', 9007199254740992) == '9007199254740992' and '%d' or '%.0f'
-- GCRA calls of one check at the head of a batch, the common case, decided
-- flat as gcra_check decides one (gcra_call below, without a function
-- call or a number parsed twice): while the next call is one GCRA check
-- on one server or a sharded client (modes 0 and 2) whose key is absent
-- or holds a value of its limit, and its key's command does not fail. The
-- first call that is not is left, undecided, to batch.lua's loop, which
-- goes on from k, a and o with the same tats, dirty and order; so is
-- every call after it. A limit's numbers are parsed once while calls
-- repeat it (ARGV strings compare by identity in Lua), and not at all for
-- a call that says it repeats them (n = 0). batch_state.lua declares the
-- state, fast.lua intf.
do
  local floor = math.floor
  local na = #ARGV
  local scap, sr, su, scost -- the strings of the numbers below
  local cap, r, u, cost, sfx, rsfx, tau
  while a <= na do
    -- n is 0 when the call's numbers are the last call's (see batch.lua),
    -- which was decided here: cap, r, u and cost hold them
    local same = ARGV[a] == '0'
    if not same and (ARGV[a] ~= '1' or ARGV[a + 3] ~= '5') then break end
    local mode = ARGV[a + 2]
    if mode ~= '0' and mode ~= '2' then break end
    if not same then
      if ARGV[a + 4] ~= scap or ARGV[a + 6] ~= sr or ARGV[a + 7] ~= su or ARGV[a + 8] ~= scost then
        scap, sr, su, scost = ARGV[a + 4], ARGV[a + 6], ARGV[a + 7], ARGV[a + 8]
        cap, r, u, cost = tonumber(scap), tonumber(sr), tonumber(su), tonumber(scost)
        do -- bucket_tau(cap, u, r) -> tau, from gcra.lua
          -- the full window of a limit, ceil(cap*u/r) µs: the time its empty
          -- bucket takes to refill, which every bucket key stores (calc.Tau)
          tau = floor((cap * u + r - 1) / r)
        end
        sfx, rsfx = '/' .. string.format(intf, tau), nil
        if r ~= 1 then rsfx = ':' .. sr .. sfx end
      end
    end
    local key = KEYS[k]
    local v = tats[key]
    if v == nil then
      -- redis.pcall: an error (WRONGTYPE) is a table, left to batch.lua
      v = redis.pcall('GET', key)
    end
    local ta, tb = nil, 0
    if v then
      if type(v) ~= 'string' then break end
      do -- gcra_parse(v, sfx, rsfx) -> a, b, from gcra.lua
        local a, b
        -- a value written under this limit, whose full window's suffix is sfx
        -- ("/<tau>"), and whose TAT has no fraction ("<a>/<tau>") or one counted
        -- in this limit's r ("<a>:<b>:<r>/<tau>": rsfx is ":<r>/<tau>", nil when
        -- r is 1; it holds no magic character of a pattern): its TAT's whole µs a
        -- and fraction b; a is nil for any other value (another limit's, an older
        -- form, not a TAT), which only the general code (gcra_tat, bucket_debt)
        -- reads. Every call of a library function costs Redis about a thousand
        -- instructions: a value with a fraction is matched once, its digits
        -- turned into numbers by arithmetic (they are digits: no tonumber call).
        a, b = nil, 0
        local sa, sb
        if rsfx then sa, sb = string.match(v, '^(%d+):(%d+)' .. rsfx .. '$') end
        if sa then
          a, b = sa + 0, sb + 0
        elseif #v > #sfx and string.find(v, sfx, -#sfx, true) then
          a = tonumber(string.sub(v, 1, -#sfx - 1))
        end
        ta, tb = a, b
      end
      if not ta then break end
    end
    local now = call_now(ARGV[a + 1])
    if not same then last = a + 3 end
    local diff = 0
    if ta then
      do -- bucket_same_debt(a, b, now, r) -> diff, from gcra.lua
        local a, b = ta, tb
        -- the time-debt at now, in 1/r µs, of a key that is full at the instant a
        -- + b/r µs, under the limit that wrote it: never cut (more than a full
        -- bucket means that the clock went back, and the key waits for it)
        diff = 0
        if a >= now then diff = (a - now) * r + b end
      end
    end
    tats[key] = v
    local allowed, remaining, retry, reset, nxt
    do -- bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt, from gcra.lua
      -- a check of cost units against a bucket diff scaled units from full
      -- (calc's bucket): allowed (1/0), remaining (below 0 after the clock went
      -- back: callers clamp), retry_after and reset_after µs, and when allowed
      -- the debt it leaves, nxt
      local full = cap * u
      remaining, retry, nxt = floor((full - diff) / u), 0, diff + cost * u
      if cost <= cap and nxt <= full then
        allowed, remaining, reset = 1, floor((full - nxt) / u), floor((nxt + r - 1) / r)
      else
        allowed, reset = 0, floor((diff + r - 1) / r)
        -- a cost above the capacity never fits: retry 0
        if cost <= cap then retry = floor((nxt - full + r - 1) / r) end
      end
    end
    if remaining < 0 then remaining = 0 end
    if allowed == 1 then
      -- gcra_defer (batch_calls below): the value, written at the end
      local value, f
      do -- gcra_value(nxt, r, now, sfx, rsfx) -> value, f, from gcra.lua
        -- the value of a TAT now + nxt/r µs under the limit whose suffixes are
        -- sfx ("/<tau>") and rsfx (":<r>/<tau>", unused when r is 1): "<a>" ..
        -- sfx, or "<a>:<b>" .. rsfx with a fraction b. Its integers are written
        -- with '%d' where the TAT's length proves it exact (a µs on the server's
        -- clock has 16 digits; see lua/doc.go), else with '%.0f': f says which,
        -- for the caller's other integers
        f = '%d'
        local at, frac = now + floor(nxt / r), nxt % r
        value = string.format(f, at)
        if #value < 12 then
          f = '%.0f'
          value = string.format(f, at)
        end
        if frac ~= 0 then
          value = value .. ':' .. string.format(f, frac) .. rsfx
        else
          value = value .. sfx
        end
      end
      local ttl
      do -- bucket_ttl(reset, server) -> ttl, from gcra.lua
        local server = ARGV[a + 1] == '0'
        -- the TTL in ms of a bucket key full in reset µs: rounded up to the ms,
        -- and, written at a now that is not the server's clock, 1000 ms more
        -- (calc.ExpiryMargin). A TTL is relative: Redis turns it into an instant
        -- on its own clock when the key is written, and a replica, a failover
        -- and a failback keep that instant (Redis 7 replicates PXAT/PEXPIREAT).
        -- On the server's clock the state's instants (a TAT, a ts) are on that
        -- same clock, so whatever node holds the key, whatever its clock, the key
        -- expires exactly when its state reads full there. An injected now is not
        -- the clock that turns the TTL into an instant: a key written on a clock
        -- that runs ahead of the one that later reads it (a client clock stepping
        -- back, an instance whose clock is behind another's) expires that much
        -- before its state is full on the reader's clock, whose step back then
        -- creates capacity where the state would have made it wait; a step
        -- forward afterwards refills again. The margin keeps such a key until
        -- its state is full on any clock up to a second behind its writer's.
        -- (Redis before 7, whose replicas turn a replicated TTL into an instant
        -- on their own clock, and MIGRATE, which sends a relative TTL, do the
        -- same on the server's clock: a node whose clock is s behind lets such a
        -- key expire up to s early, at most s of refill, never more than the
        -- key's capacity.)
        ttl = floor((reset + 999) / 1000)
        if not server then ttl = ttl + 1000 end
      end
      tats[key] = value
      if not dirty[key] then order[#order + 1] = key end
      dirty[key] = string.format(f, ttl)
    end
    if allowed == 0 and mode == '2' and redis.call('EXISTS', KEYS[k + 1]) == 1 then allowed = 2 end
    reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4] = allowed, remaining, retry, reset
    o = o + 4
    if same then a = a + 3 else a = a + 9 end
    if mode == '0' then k = k + 1 else k = k + 2 end
  end
end
-- Every call decided: the TATs written, and the reply, before anything
-- else is defined.
if a > #ARGV then
  flush()
  return reply
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
  local e
  do -- fw_string_end(ms) -> e, from fixed_window.lua
    -- the end, in µs, of the window of a string whose expiry (or TTL) is ms:
    -- Redis keeps a key through the ms of its expiry
    e = (ms + 1) * 1000
  end
  return c, e
end
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
      local last
      do -- fw_pxat(stop) -> last, from fixed_window.lua
        -- the expiry, for PXAT, of a string whose window ends at stop (µs, a
        -- whole ms): the window's last ms, written with '%d' where its length
        -- proves it exact (a ms on the server's clock has 13 digits; see
        -- lua/doc.go), else with '%.0f'
        local ms = stop / 1000 - 1
        last = string.format('%d', ms)
        if #last < 12 then last = string.format('%.0f', ms) end
      end
      redis.call('SET', key, fmt(count), 'PXAT', last)
    end
    return
  end
  if str then
    redis.call('DEL', key)
    same = false
  end
  local _
  do -- fw_hash_write(key, start, stop, total, now, same, server) -> done, from fixed_window.lua
    local total = count
    local done
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
    _ = done
  end
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
  local count, start, stop
  do -- fw_window(s, e, c, str, now, period) -> count, start, stop, from fixed_window.lua
    -- the count that a key holding the window [s, e) with c units (a hash;
    -- with str, a string: its count c until its expiry e, its start unknown)
    -- still counts at now under period, and the window [start, stop) a check
    -- at now writes to
    do -- window_end(now, period) -> start, stop, from fixed_window.lua
      -- the window of period (µs) that holds now, aligned to the Unix epoch
      -- (Lua's a % b is a - floor(a / b) * b: no call of floor, which the
      -- string layout's common case then need not define)
      start = now - now % period
      stop = start + period
    end
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
  end
  local allowed, remaining, retry, reset, total
  do -- window_decide(count, stop, now, cap, cost) -> allowed, remaining, retry, reset, total, from fixed_window.lua
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
  end
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
  local _
  do -- fw_hash_refund(key, e, c, at, reset, cost) -> gave, from fixed_window.lua
    local gave
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
    _ = gave
  end
end
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
-- Sliding window counter (sliding_window.lua): hash {s = start µs of the
-- stored window, e = its end µs, c = count in it, p = count in the window
-- before}.

-- sw_load returns the stored window's start, end, count and previous count,
-- or nil, and whether start and end are stored as such (not the older
-- form).
local function sw_load(key, period)
  local v = redis.call('HMGET', key, 's', 'e', 'c', 'p', 'w')
  local s, e, c, p = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
  local stored = s ~= nil
  if not s then
    local w = tonumber(v[5])
    if not w then return nil end
    s = w * period
    e = s + period
  end
  if not (e and c and p) then return nil end
  return s, e, c, p, stored
end

local function sliding_window_write(key, start, period, cur, prev, reset, held, server)
  local _
  do -- sw_write(key, start, period, cur, prev, reset, held, server, f) -> done, from sliding_window.lua
    local f = '%.0f'
    local done
    -- stores the counts of the window [start, start + period) and the one
    -- before, expiring in reset µs, integers formatted with f. When the key
    -- holds that window with a count (held), it expires at start + 2 periods
    -- already: on the server's clock only the count changes.
    if held and server then
      redis.call('HSET', key, 'c', string.format(f, cur))
    else
      redis.call('HSET', key, 's', string.format(f, start), 'e', string.format(f, start + period),
        'c', string.format(f, cur), 'p', string.format(f, prev))
      redis.call('PEXPIRE', key, string.format(f, floor((reset + 999) / 1000)))
    end
    done = true
    _ = done
  end
end

local function sliding_window(key, cap, period, _, _, cost, now, commit, server)
  local s, e, c, p, stored = sw_load(key, period)
  local start, cur, prev, held, life
  do -- sw_window(s, e, c, p, stored, now, period) -> start, cur, prev, held, life, from sliding_window.lua
    -- the current window (its start) and its count and the previous one's,
    -- of a key that holds the window [s, e) with c units and p before it (s
    -- nil: no state; stored: s and e are stored as such, not the older form),
    -- at now under period; held says the key holds the current window with a
    -- count, and life is the instant the stored counts are forgotten after a
    -- change of period (-1: no such instant before the key's own TTL)
    local _
    do -- window_end(now, period) -> start, stop, from fixed_window.lua
      local stop
      -- the window of period (µs) that holds now, aligned to the Unix epoch
      -- (Lua's a % b is a - floor(a / b) * b: no call of floor, which the
      -- string layout's common case then need not define)
      start = now - now % period
      stop = start + period
      _ = stop
    end
    cur, prev, held, life = 0, 0, false, -1
    if s then
      local old = e - s
      if old == period and s > start then
        start, cur, prev, held = s, c, p, stored and c > 0
      elseif old == period then
        if s == start then
          cur, prev, held = c, p, stored and c > 0
        elseif s == start - period then
          prev = c
        end
      else
        life = e
        if c > 0 then life = life + old end
        if now < life then
          -- each stored window's count to the window it started in
          for _, w in ipairs({{s, c}, {s - old, p}}) do
            if w[1] >= start then
              cur = cur + w[2]
            elseif w[1] >= start - period then
              prev = prev + w[2]
            end
          end
        end
      end
    end
  end
  local allowed, remaining, retry, reset, total
  do -- sw_decide(start, cur, prev, now, period, cap, cost, life) -> allowed, remaining, retry, reset, total, from sliding_window.lua
    -- a check of cost units at now, in the current window that starts at
    -- start with cur units, prev in the one before (life: see sw_window):
    -- allowed (1/0), remaining (below 0 after the estimate passed the
    -- capacity: callers clamp), retry_after µs (the first instant the check
    -- passes with no other traffic: later in this window as the previous
    -- window's weight fades, or in the next, where cur becomes the previous
    -- count), reset_after µs, and the current count it leaves, total
    local x = now - start
    if x < 0 then x = 0 end
    local est
    do -- sw_estimate(prev, period, x) -> est, from sliding_window.lua
      -- the previous window's weight at elapsed x into the current one
      est = prev * (period - x) / period
    end
    do -- sw_trunc(x) -> n, from sliding_window.lua
      local x = cap - est - cur
      local n
      -- x rounded toward zero
      if x >= 0 then n = floor(x) else n = -floor(-x) end
      remaining = n
    end
    do -- sw_reset(start, period, now, cur, prev, life) -> reset, from sliding_window.lua
      -- reset_after at now of a key whose current window starts at start with
      -- cur units, prev in the window before: no later than life, the instant
      -- its counts are forgotten, when life is not -1; never below 0
      reset = 0
      if cur > 0 then
        reset = start + 2 * period - now
      elseif prev > 0 then
        reset = start + period - now
      end
      if life >= 0 and reset > life - now then reset = life - now end
      if reset < 0 then reset = 0 end
    end
    allowed, retry, total = 0, 0, cur
    if cost <= cap then
      local pass
      do -- sw_pass(prev, cur, cost, cap, period, x) -> pass, from sliding_window.lua
        local est
        do -- sw_estimate(prev, period, x) -> est, from sliding_window.lua
          -- the previous window's weight at elapsed x into the current one
          est = prev * (period - x) / period
        end
        pass = est + (cur + cost) <= cap
      end
      if pass then
        allowed, total = 1, cur + cost
        do -- sw_trunc(x) -> n, from sliding_window.lua
          local x = cap - est - total
          local n
          -- x rounded toward zero
          if x >= 0 then n = floor(x) else n = -floor(-x) end
          remaining = n
        end
        do -- sw_reset(start, period, now, cur, prev, life) -> reset, from sliding_window.lua
          local cur, life = total, -1
          -- reset_after at now of a key whose current window starts at start with
          -- cur units, prev in the window before: no later than life, the instant
          -- its counts are forgotten, when life is not -1; never below 0
          reset = 0
          if cur > 0 then
            reset = start + 2 * period - now
          elseif prev > 0 then
            reset = start + period - now
          end
          if life >= 0 and reset > life - now then reset = life - now end
          if reset < 0 then reset = 0 end
        end
      else
        local wp, wc, ws, we = prev, cur, start, x
        if cur + cost > cap then
          wp, wc, ws, we = cur, 0, start + period, 0
        end
        -- prev*(period-y)/period <= cap-cur-cost: a first guess by algebra,
        -- then corrected by the exact predicate (float rounding)
        local slack = cap - wc - cost
        local y
        do -- sw_trunc(x) -> n, from sliding_window.lua
          local x = period - slack * period / wp
          local n
          -- x rounded toward zero
          if x >= 0 then n = floor(x) else n = -floor(-x) end
          y = n
        end
        if y < we then y = we end
        if y > period then y = period end
        while y < period do
          local ok
          do -- sw_pass(prev, cur, cost, cap, period, x) -> pass, from sliding_window.lua
            local prev, cur, x = wp, wc, y
            local pass
            local est
            do -- sw_estimate(prev, period, x) -> est, from sliding_window.lua
              -- the previous window's weight at elapsed x into the current one
              est = prev * (period - x) / period
            end
            pass = est + (cur + cost) <= cap
            ok = pass
          end
          if ok then break end
          y = y + 1
        end
        while y > we do
          local ok
          do -- sw_pass(prev, cur, cost, cap, period, x) -> pass, from sliding_window.lua
            local prev, cur, x = wp, wc, y - 1
            local pass
            local est
            do -- sw_estimate(prev, period, x) -> est, from sliding_window.lua
              -- the previous window's weight at elapsed x into the current one
              est = prev * (period - x) / period
            end
            pass = est + (cur + cost) <= cap
            ok = pass
          end
          if not ok then break end
          y = y - 1
        end
        retry = ws + y - now
        if life >= 0 and retry > life - now then retry = life - now end
        if retry < 0 then retry = 0 end
      end
    end
  end
  if allowed == 1 and commit then sliding_window_write(key, start, period, total, prev, reset, held, server) end
  return allowed, remaining, retry, reset, start, period, total, prev, reset, held, server
end

-- Refund: take cost back from the window a commit at at added it to, named
-- by the commit's reply reset = start + 2*period - at. The units are the
-- current count while the key is still at that window, the previous count
-- once it has moved on to the next, and forgotten after that (or once the
-- period has changed); the key then lives as the state left needs at now.
local function sliding_window_refund(key, _, period, _, _, cost, at, reset, now)
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
  local left
  do -- sw_reset(start, period, now, cur, prev, life) -> reset, from sliding_window.lua
    local start, cur, prev, life = w, c, p, -1
    local reset
    -- reset_after at now of a key whose current window starts at start with
    -- cur units, prev in the window before: no later than life, the instant
    -- its counts are forgotten, when life is not -1; never below 0
    reset = 0
    if cur > 0 then
      reset = start + 2 * period - now
    elseif prev > 0 then
      reset = start + period - now
    end
    if life >= 0 and reset > life - now then reset = life - now end
    if reset < 0 then reset = 0 end
    left = reset
  end
  if left <= 0 then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key, 'c', fmt(c), 'p', fmt(p))
  pexpire(key, left)
end
-- bucket_debt returns the time-debt at now, in 1/r µs, of a token bucket
-- or GCRA key that is full at the instant a + b/rs µs (b < rs), and
-- whether it was cut to full (cap*u). A fraction counted in another
-- refill (rs ~= r) is rounded up to the next whole µs. same says that the
-- key was written under a limit of the same full window (tau, which every
-- bucket key stores): then the debt is never cut, since more than a full
-- bucket means that the clock went back, and the key waits for it to
-- catch up (a clock going back never creates capacity). Under another
-- limit a debt above full is cut to full, and the caller stores the cut.
local function bucket_debt(a, b, rs, now, r, full, same)
  if b ~= 0 and rs ~= r then a, b = a + 1, 0 end
  local diff
  do -- bucket_same_debt(a, b, now, r) -> diff, from gcra.lua
    -- the time-debt at now, in 1/r µs, of a key that is full at the instant a
    -- + b/r µs, under the limit that wrote it: never cut (more than a full
    -- bucket means that the clock went back, and the key waits for it)
    diff = 0
    if a >= now then diff = (a - now) * r + b end
  end
  if diff > full and not same then return full, true end
  return diff, false
end
-- Token bucket (token_bucket.lua): hash {m = tokens missing from a full
-- bucket, as the time they take to refill in 1/r µs; r = "<r>/<tau>", the
-- refill of the limit that wrote m and that limit's full window tau =
-- ceil(cap*u/r) µs; ts = the instant m was counted at, µs}. One token is u
-- units; the bucket refills r units per µs, exactly. The bucket is full at
-- ts + m/r µs, the instant GCRA stores as its TAT, read by the same
-- bucket_debt: under the limit that wrote it the debt is never cut (more
-- than a full bucket means the clock went back: the key waits for it);
-- across a change of limit it is kept, cut to one full bucket of the new
-- limit, and the two algorithms make the same decisions. A denied check
-- writes nothing (but a cut debt), so no accrued refill is ever lost.
-- State written before tau was stored (r a bare number) is read as written
-- under another limit; state written before m was stored, {t = tokens in
-- scaled units, ts}, is read under the current limit.

-- token_bucket_write stores a debt of m scaled units at now, full in reset
-- µs, under a limit of full window tau.
local function token_bucket_write(key, m, r, now, reset, tau, server)
  redis.call('HSET', key, 'm', fmt(m), 'r', fmt(r) .. '/' .. fmt(tau), 'ts', fmt(now))
  local ttl
  do -- bucket_ttl(reset, server) -> ttl, from gcra.lua
    -- the TTL in ms of a bucket key full in reset µs: rounded up to the ms,
    -- and, written at a now that is not the server's clock, 1000 ms more
    -- (calc.ExpiryMargin). A TTL is relative: Redis turns it into an instant
    -- on its own clock when the key is written, and a replica, a failover
    -- and a failback keep that instant (Redis 7 replicates PXAT/PEXPIREAT).
    -- On the server's clock the state's instants (a TAT, a ts) are on that
    -- same clock, so whatever node holds the key, whatever its clock, the key
    -- expires exactly when its state reads full there. An injected now is not
    -- the clock that turns the TTL into an instant: a key written on a clock
    -- that runs ahead of the one that later reads it (a client clock stepping
    -- back, an instance whose clock is behind another's) expires that much
    -- before its state is full on the reader's clock, whose step back then
    -- creates capacity where the state would have made it wait; a step
    -- forward afterwards refills again. The margin keeps such a key until
    -- its state is full on any clock up to a second behind its writer's.
    -- (Redis before 7, whose replicas turn a replicated TTL into an instant
    -- on their own clock, and MIGRATE, which sends a relative TTL, do the
    -- same on the server's clock: a node whose clock is s behind lets such a
    -- key expire up to s early, at most s of refill, never more than the
    -- key's capacity.)
    ttl = floor((reset + 999) / 1000)
    if not server then ttl = ttl + 1000 end
  end
  redis.call('PEXPIRE', key, fmt(ttl))
end

-- tb_load returns the key's time-debt at now in 1/r µs (0 for no state, or
-- a full bucket) and whether the key holds state; it stores a cut debt.
local function tb_load(key, full, r, now, tau, server)
  local v = redis.call('HMGET', key, 'm', 'r', 'ts')
  local m, ts = tonumber(v[1]), tonumber(v[3])
  if not ts then return 0, false end
  local rs, tw
  if v[2] then
    local s = string.find(v[2], '/', 1, true)
    if s then
      rs, tw = tonumber(string.sub(v[2], 1, s - 1)), tonumber(string.sub(v[2], s + 1))
    else
      rs = tonumber(v[2])
    end
  end
  if not (m and rs) then
    local t = tonumber(redis.call('HGET', key, 't'))
    if not t then return 0, false end
    if t > full then t = full end
    m, rs = full - t, r
  end
  local diff, cut = bucket_debt(ts + floor(m / rs), m % rs, rs, now, r, full, tw == tau)
  if cut then token_bucket_write(key, diff, r, now, ceil_div(diff, r), tau, server) end
  return diff, true
end

local function token_bucket(key, cap, _, r, u, cost, now, commit, server)
  local tau
  do -- bucket_tau(cap, u, r) -> tau, from gcra.lua
    -- the full window of a limit, ceil(cap*u/r) µs: the time its empty
    -- bucket takes to refill, which every bucket key stores (calc.Tau)
    tau = floor((cap * u + r - 1) / r)
  end
  local diff = tb_load(key, cap * u, r, now, tau, server)
  local allowed, remaining, retry, reset, nxt
  do -- bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt, from gcra.lua
    -- a check of cost units against a bucket diff scaled units from full
    -- (calc's bucket): allowed (1/0), remaining (below 0 after the clock went
    -- back: callers clamp), retry_after and reset_after µs, and when allowed
    -- the debt it leaves, nxt
    local full = cap * u
    remaining, retry, nxt = floor((full - diff) / u), 0, diff + cost * u
    if cost <= cap and nxt <= full then
      allowed, remaining, reset = 1, floor((full - nxt) / u), floor((nxt + r - 1) / r)
    else
      allowed, reset = 0, floor((diff + r - 1) / r)
      -- a cost above the capacity never fits: retry 0
      if cost <= cap then retry = floor((nxt - full + r - 1) / r) end
    end
  end
  if allowed == 1 and commit then token_bucket_write(key, nxt, r, now, reset, tau, server) end
  return allowed, remaining, retry, reset, nxt, r, now, reset, tau, server
end

-- Refund: put back the cost tokens a commit took (no more than
-- bucket_give gives back, from the commit's horizon less what refunds
-- gave back since it: see refund_since), clamped to the capacity,
-- evaluated at now, so no refill is counted twice.
local function token_bucket_refund(key, cap, _, r, u, cost, at, reset, now, mark, server)
  local tau
  do -- bucket_tau(cap, u, r) -> tau, from gcra.lua
    -- the full window of a limit, ceil(cap*u/r) µs: the time its empty
    -- bucket takes to refill, which every bucket key stores (calc.Tau)
    tau = floor((cap * u + r - 1) / r)
  end
  local diff, exists = tb_load(key, cap * u, r, now, tau, server)
  if not exists then return end
  local since, rec = refund_since(key, mark, at, reset)
  local give
  do -- bucket_give(cost, u, at, reset, now, r) -> give, from gcra.lua
    local reset = reset - since
    -- the time-debt, in 1/r µs, that a late refund of cost units gives back
    -- at now: their own, but no more than what is left at now of the debt of
    -- the commit at at, which replied reset µs to full (units the bucket
    -- refilled since are not given back again: that would create capacity);
    -- calc's refundDebt
    give = math.max(0, math.min(cost * u, (at + reset - now) * r))
  end
  refund_add(rec, ceil_div(give, r), now, tau)
  diff = diff - give
  if diff <= 0 then
    redis.call('DEL', key)
    return
  end
  token_bucket_write(key, diff, r, now, ceil_div(diff, r), tau, server)
end
-- GCRA (gcra.lua): its state is one string, the theoretical arrival time
-- TAT = a + b/r µs, then the full window of the limit that wrote it:
-- "<a>/<tau>", or "<a>:<b>:<r>/<tau>" with a fraction.

-- gcra_tat parses a stored TAT into (a, b, rs, tau); nil if it is not one,
-- tau nil if the value predates it.
local function gcra_tat(v, r)
  local tw
  local s = string.find(v, '/', 1, true)
  if s then
    tw = tonumber(string.sub(v, s + 1))
    v = string.sub(v, 1, s - 1)
  end
  local a = tonumber(v)
  if a then return a, 0, r, tw end
  local sa, sb, sr = string.match(v, '^(%d+):(%d+):(%d+)$')
  if sa then return tonumber(sa), tonumber(sb), tonumber(sr), tw end
  sa, sb = string.match(v, '^(%d+):(%d+)$')
  return tonumber(sa), tonumber(sb), r, tw
end

-- gcra_write stores the TAT now + diff/r µs of a limit of full window tau,
-- to expire when it is reached (bucket_ttl).
local function gcra_write(key, diff, r, now, tau, server)
  local sfx = '/' .. fmt(tau)
  local value, f
  do -- gcra_value(nxt, r, now, sfx, rsfx) -> value, f, from gcra.lua
    local nxt, rsfx = diff, ':' .. fmt(r) .. sfx
    -- the value of a TAT now + nxt/r µs under the limit whose suffixes are
    -- sfx ("/<tau>") and rsfx (":<r>/<tau>", unused when r is 1): "<a>" ..
    -- sfx, or "<a>:<b>" .. rsfx with a fraction b. Its integers are written
    -- with '%d' where the TAT's length proves it exact (a µs on the server's
    -- clock has 16 digits; see lua/doc.go), else with '%.0f': f says which,
    -- for the caller's other integers
    f = '%d'
    local at, frac = now + floor(nxt / r), nxt % r
    value = string.format(f, at)
    if #value < 12 then
      f = '%.0f'
      value = string.format(f, at)
    end
    if frac ~= 0 then
      value = value .. ':' .. string.format(f, frac) .. rsfx
    else
      value = value .. sfx
    end
  end
  local ttl
  do -- bucket_ttl(reset, server) -> ttl, from gcra.lua
    local reset = ceil_div(diff, r)
    -- the TTL in ms of a bucket key full in reset µs: rounded up to the ms,
    -- and, written at a now that is not the server's clock, 1000 ms more
    -- (calc.ExpiryMargin). A TTL is relative: Redis turns it into an instant
    -- on its own clock when the key is written, and a replica, a failover
    -- and a failback keep that instant (Redis 7 replicates PXAT/PEXPIREAT).
    -- On the server's clock the state's instants (a TAT, a ts) are on that
    -- same clock, so whatever node holds the key, whatever its clock, the key
    -- expires exactly when its state reads full there. An injected now is not
    -- the clock that turns the TTL into an instant: a key written on a clock
    -- that runs ahead of the one that later reads it (a client clock stepping
    -- back, an instance whose clock is behind another's) expires that much
    -- before its state is full on the reader's clock, whose step back then
    -- creates capacity where the state would have made it wait; a step
    -- forward afterwards refills again. The margin keeps such a key until
    -- its state is full on any clock up to a second behind its writer's.
    -- (Redis before 7, whose replicas turn a replicated TTL into an instant
    -- on their own clock, and MIGRATE, which sends a relative TTL, do the
    -- same on the server's clock: a node whose clock is s behind lets such a
    -- key expire up to s early, at most s of refill, never more than the
    -- key's capacity.)
    ttl = floor((reset + 999) / 1000)
    if not server then ttl = ttl + 1000 end
  end
  redis.call('SET', key, value, 'PX', string.format(f, ttl))
end

local function gcra(key, cap, _, r, u, cost, now, commit, server)
  -- diff: 0 for no state or a TAT in the past (a full bucket)
  local tau
  do -- bucket_tau(cap, u, r) -> tau, from gcra.lua
    -- the full window of a limit, ceil(cap*u/r) µs: the time its empty
    -- bucket takes to refill, which every bucket key stores (calc.Tau)
    tau = floor((cap * u + r - 1) / r)
  end
  local diff = 0
  local v = redis.call('GET', key)
  if v then
    local a, b, rs, tw = gcra_tat(v, r)
    if a and b and rs then
      local cut
      diff, cut = bucket_debt(a, b, rs, now, r, cap * u, tw == tau)
      if cut then gcra_write(key, diff, r, now, tau, server) end
    end
  end
  local allowed, remaining, retry, reset, nxt
  do -- bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt, from gcra.lua
    -- a check of cost units against a bucket diff scaled units from full
    -- (calc's bucket): allowed (1/0), remaining (below 0 after the clock went
    -- back: callers clamp), retry_after and reset_after µs, and when allowed
    -- the debt it leaves, nxt
    local full = cap * u
    remaining, retry, nxt = floor((full - diff) / u), 0, diff + cost * u
    if cost <= cap and nxt <= full then
      allowed, remaining, reset = 1, floor((full - nxt) / u), floor((nxt + r - 1) / r)
    else
      allowed, reset = 0, floor((diff + r - 1) / r)
      -- a cost above the capacity never fits: retry 0
      if cost <= cap then retry = floor((nxt - full + r - 1) / r) end
    end
  end
  if allowed == 1 and commit then gcra_write(key, nxt, r, now, tau, server) end
  return allowed, remaining, retry, reset, nxt, r, now, tau, server
end

-- Refund: move the TAT back by the cost's emission time (no more than
-- bucket_give gives back, from the commit's horizon less what refunds
-- gave back since it: see refund_since), evaluated at now, not below now.
-- A TAT at or before now is a full bucket: the key is deleted.
local function gcra_refund(key, cap, _, r, u, cost, at, reset, now, mark, server)
  local v = redis.call('GET', key)
  if not v then return end
  local tau
  do -- bucket_tau(cap, u, r) -> tau, from gcra.lua
    -- the full window of a limit, ceil(cap*u/r) µs: the time its empty
    -- bucket takes to refill, which every bucket key stores (calc.Tau)
    tau = floor((cap * u + r - 1) / r)
  end
  local a, b, rs, tw = gcra_tat(v, r)
  if not (a and b and rs) then return end
  local since, rec = refund_since(key, mark, at, reset)
  local give
  do -- bucket_give(cost, u, at, reset, now, r) -> give, from gcra.lua
    local reset = reset - since
    -- the time-debt, in 1/r µs, that a late refund of cost units gives back
    -- at now: their own, but no more than what is left at now of the debt of
    -- the commit at at, which replied reset µs to full (units the bucket
    -- refilled since are not given back again: that would create capacity);
    -- calc's refundDebt
    give = math.max(0, math.min(cost * u, (at + reset - now) * r))
  end
  refund_add(rec, ceil_div(give, r), now, tau)
  local diff = bucket_debt(a, b, rs, now, r, cap * u, tw == tau) - give
  if diff <= 0 then
    redis.call('DEL', key)
    return
  end
  gcra_write(key, diff, r, now, tau, server)
end
-- Concurrency: the slots of a key in flight, a sorted set with one member
-- per slot, "<lease>:<n>" (n from 0 to cost-1 within its lease), scored
-- with the instant (µs) its lease expires. A slot counts while its expiry
-- is after now; every check first removes the expired ones, so the set
-- holds at most cap members plus those that expired since the last touch.
-- r is the check's lease id (the Go side sends Check.Lease there; this
-- algorithm has no refill). Slots leave by release.lua or by expiring;
-- renew.lua extends them.
-- concurrency_write adds the cost slots of lease, expiring at expiry, and
-- sets the key's TTL to ttl µs (until its last slot expires).
local function concurrency_write(key, lease, cost, expiry, ttl)
  zadd_units(key, fmt(expiry), fmt(lease), 0, cost)
  pexpire(key, ttl)
end

local function concurrency(key, cap, period, lease, _, cost, now, commit)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
  local count = redis.call('ZCARD', key)
  local reset, last = 0, 0
  if count > 0 then
    last = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    reset = last - now
  end
  if cost > cap then return 0, cap - count, 0, reset end
  local l = fmt(lease)
  if redis.call('ZSCORE', key, l .. ':0') then
    -- the lease acquires again (a call retried after its reply was lost):
    -- its own slots are not taken from others, and are taken again
    local i = 0
    while i < cost do
      if redis.call('ZSCORE', key, l .. ':' .. fmt(i)) then count = count - 1 end
      i = i + 1
    end
  end
  if count + cost > cap then
    -- the (count+cost-cap)-th earliest lease to expire frees enough slots
    local e = redis.call('ZRANGE', key, count + cost - cap - 1, count + cost - cap - 1, 'WITHSCORES')
    return 0, cap - count, tonumber(e[2]) - now, reset
  end
  local expiry = now + period
  if reset < period then reset = period end
  if commit then concurrency_write(key, lease, cost, expiry, reset) end
  return 1, cap - count - cost, 0, reset, lease, cost, expiry, reset
end

-- concurrency_remove drops the expired slots of key and slots 0 to cost-1
-- of lease, then sets the key's TTL to its last slot's expiry (an empty
-- sorted set is deleted by Redis). It returns how many slots of the lease
-- it removed.
local function concurrency_remove(key, lease, cost, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
  local l = fmt(lease)
  local args = {}
  local removed = 0
  local i = 0
  while i < cost do
    args[#args + 1] = l .. ':' .. fmt(i)
    i = i + 1
    if #args == 200 or i == cost then
      removed = removed + redis.call('ZREM', key, unpack(args))
      args = {}
    end
  end
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then pexpire(key, tonumber(last[2]) - now) end
  return removed
end

-- Refund (Cluster compensation): the slots a commit took go, as a release
-- would free them.
local function concurrency_refund(key, _, _, lease, _, cost, now, _)
  concurrency_remove(key, lease, cost, now)
end
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
    local count, until_end
    do -- fw_count(key, cap, period, cost, ncost, now) -> count, reset, from fixed_window.lua
      local cost, ncost = ARGV[b + 4], cost
      local reset
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
          do -- window_end(now, period) -> start, stop, from fixed_window.lua
            local now, period = t, period + 0
            -- the window of period (µs) that holds now, aligned to the Unix epoch
            -- (Lua's a % b is a - floor(a / b) * b: no call of floor, which the
            -- string layout's common case then need not define)
            start = now - now % period
            stop = start + period
          end
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
            local last
            do -- fw_pxat(stop) -> last, from fixed_window.lua
              -- the expiry, for PXAT, of a string whose window ends at stop (µs, a
              -- whole ms): the window's last ms, written with '%d' where its length
              -- proves it exact (a ms on the server's clock has 13 digits; see
              -- lua/doc.go), else with '%.0f'
              local ms = stop / 1000 - 1
              last = string.format('%d', ms)
              if #last < 12 then last = string.format('%.0f', ms) end
            end
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
            do -- fw_string_end(ms) -> e, from fixed_window.lua
              local ms = ttl
              local e
              -- the end, in µs, of the window of a string whose expiry (or TTL) is ms:
              -- Redis keeps a key through the ms of its expiry
              e = (ms + 1) * 1000
              reset = e
            end
          elseif c == ncost then
            -- Redis 6: no TTL, so a window starts
            redis.call('PEXPIREAT', key, stop / 1000 - 1)
            count, reset = c, stop - t
          else
            redis.call('DECRBY', key, cost)
          end
        end
      end
      until_end = reset
    end
    if not count then return end
    local allowed, remaining, retry, reset, _
    do -- window_decide(count, stop, now, cap, cost) -> allowed, remaining, retry, reset, total, from fixed_window.lua
      local count, stop, now = count - cost, until_end, 0
      local total
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
      _ = total
    end
    if remaining < 0 then remaining = 0 end
    return allowed, remaining, retry, reset
  end
  local allowed, remaining, retry, reset
  do -- fw_hash_check(key, cap, period, cost, now, server) -> allowed, remaining, retry, reset, from fixed_window.lua
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
        local count, start, stop
        do -- fw_window(s, e, c, str, now, period) -> count, start, stop, from fixed_window.lua
          local str, now = false, t
          -- the count that a key holding the window [s, e) with c units (a hash;
          -- with str, a string: its count c until its expiry e, its start unknown)
          -- still counts at now under period, and the window [start, stop) a check
          -- at now writes to
          do -- window_end(now, period) -> start, stop, from fixed_window.lua
            -- the window of period (µs) that holds now, aligned to the Unix epoch
            -- (Lua's a % b is a - floor(a / b) * b: no call of floor, which the
            -- string layout's common case then need not define)
            start = now - now % period
            stop = start + period
          end
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
        end
        local total
        do -- window_decide(count, stop, now, cap, cost) -> allowed, remaining, retry, reset, total, from fixed_window.lua
          local now = t
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
        end
        if remaining < 0 then remaining = 0 end
        if allowed == 1 then
          local _
          do -- fw_hash_write(key, start, stop, total, now, same, server) -> done, from fixed_window.lua
            local now, same = t, s == start and e == stop
            local done
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
            _ = done
          end
        end
      end
    end
  end
  return allowed, remaining, retry, reset
end
-- Sliding window counter, one check, the common case written flat, as a
-- function for the one-check and batch scripts: a key that holds no state
-- or windows stored as instants. sliding_window_fast makes
-- sliding_window's decision with its formulas, as token_bucket_fast does
-- (token_bucket.lua), and returns nothing, having written nothing, for an
-- older state it leaves to the general code. A key holding the current
-- window with a count expires at the window's start + 2 periods, whichever
-- check of the window wrote it last: on the server's clock (server) a
-- check that adds to that count writes only the count and leaves the TTL.
local sw_b, sw_cap, sw_period, sw_cost -- its numbers at b (see token_bucket_fast)
local function sliding_window_fast(key, b, now, server)
  local floor = math.floor
  local v = redis.call('HMGET', key, 's', 'e', 'c', 'p', 'w')
  if b ~= sw_b then
    sw_b, sw_cap, sw_period, sw_cost = b, tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 4])
  end
  local period = sw_period
  local s, e, c, p = tonumber(v[1]), tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
  if (not s and not v[5]) or (s and e and c and p) then
    local cap, cost = sw_cap, sw_cost
    local start, cur, prev, held, life
    do -- sw_window(s, e, c, p, stored, now, period) -> start, cur, prev, held, life, from sliding_window.lua
      local stored = true
      -- the current window (its start) and its count and the previous one's,
      -- of a key that holds the window [s, e) with c units and p before it (s
      -- nil: no state; stored: s and e are stored as such, not the older form),
      -- at now under period; held says the key holds the current window with a
      -- count, and life is the instant the stored counts are forgotten after a
      -- change of period (-1: no such instant before the key's own TTL)
      local _
      do -- window_end(now, period) -> start, stop, from fixed_window.lua
        local stop
        -- the window of period (µs) that holds now, aligned to the Unix epoch
        -- (Lua's a % b is a - floor(a / b) * b: no call of floor, which the
        -- string layout's common case then need not define)
        start = now - now % period
        stop = start + period
        _ = stop
      end
      cur, prev, held, life = 0, 0, false, -1
      if s then
        local old = e - s
        if old == period and s > start then
          start, cur, prev, held = s, c, p, stored and c > 0
        elseif old == period then
          if s == start then
            cur, prev, held = c, p, stored and c > 0
          elseif s == start - period then
            prev = c
          end
        else
          life = e
          if c > 0 then life = life + old end
          if now < life then
            -- each stored window's count to the window it started in
            for _, w in ipairs({{s, c}, {s - old, p}}) do
              if w[1] >= start then
                cur = cur + w[2]
              elseif w[1] >= start - period then
                prev = prev + w[2]
              end
            end
          end
        end
      end
    end
    local allowed, remaining, retry, reset, total
    do -- sw_decide(start, cur, prev, now, period, cap, cost, life) -> allowed, remaining, retry, reset, total, from sliding_window.lua
      -- a check of cost units at now, in the current window that starts at
      -- start with cur units, prev in the one before (life: see sw_window):
      -- allowed (1/0), remaining (below 0 after the estimate passed the
      -- capacity: callers clamp), retry_after µs (the first instant the check
      -- passes with no other traffic: later in this window as the previous
      -- window's weight fades, or in the next, where cur becomes the previous
      -- count), reset_after µs, and the current count it leaves, total
      local x = now - start
      if x < 0 then x = 0 end
      local est
      do -- sw_estimate(prev, period, x) -> est, from sliding_window.lua
        -- the previous window's weight at elapsed x into the current one
        est = prev * (period - x) / period
      end
      do -- sw_trunc(x) -> n, from sliding_window.lua
        local x = cap - est - cur
        local n
        -- x rounded toward zero
        if x >= 0 then n = floor(x) else n = -floor(-x) end
        remaining = n
      end
      do -- sw_reset(start, period, now, cur, prev, life) -> reset, from sliding_window.lua
        -- reset_after at now of a key whose current window starts at start with
        -- cur units, prev in the window before: no later than life, the instant
        -- its counts are forgotten, when life is not -1; never below 0
        reset = 0
        if cur > 0 then
          reset = start + 2 * period - now
        elseif prev > 0 then
          reset = start + period - now
        end
        if life >= 0 and reset > life - now then reset = life - now end
        if reset < 0 then reset = 0 end
      end
      allowed, retry, total = 0, 0, cur
      if cost <= cap then
        local pass
        do -- sw_pass(prev, cur, cost, cap, period, x) -> pass, from sliding_window.lua
          local est
          do -- sw_estimate(prev, period, x) -> est, from sliding_window.lua
            -- the previous window's weight at elapsed x into the current one
            est = prev * (period - x) / period
          end
          pass = est + (cur + cost) <= cap
        end
        if pass then
          allowed, total = 1, cur + cost
          do -- sw_trunc(x) -> n, from sliding_window.lua
            local x = cap - est - total
            local n
            -- x rounded toward zero
            if x >= 0 then n = floor(x) else n = -floor(-x) end
            remaining = n
          end
          do -- sw_reset(start, period, now, cur, prev, life) -> reset, from sliding_window.lua
            local cur, life = total, -1
            -- reset_after at now of a key whose current window starts at start with
            -- cur units, prev in the window before: no later than life, the instant
            -- its counts are forgotten, when life is not -1; never below 0
            reset = 0
            if cur > 0 then
              reset = start + 2 * period - now
            elseif prev > 0 then
              reset = start + period - now
            end
            if life >= 0 and reset > life - now then reset = life - now end
            if reset < 0 then reset = 0 end
          end
        else
          local wp, wc, ws, we = prev, cur, start, x
          if cur + cost > cap then
            wp, wc, ws, we = cur, 0, start + period, 0
          end
          -- prev*(period-y)/period <= cap-cur-cost: a first guess by algebra,
          -- then corrected by the exact predicate (float rounding)
          local slack = cap - wc - cost
          local y
          do -- sw_trunc(x) -> n, from sliding_window.lua
            local x = period - slack * period / wp
            local n
            -- x rounded toward zero
            if x >= 0 then n = floor(x) else n = -floor(-x) end
            y = n
          end
          if y < we then y = we end
          if y > period then y = period end
          while y < period do
            local ok
            do -- sw_pass(prev, cur, cost, cap, period, x) -> pass, from sliding_window.lua
              local prev, cur, x = wp, wc, y
              local pass
              local est
              do -- sw_estimate(prev, period, x) -> est, from sliding_window.lua
                -- the previous window's weight at elapsed x into the current one
                est = prev * (period - x) / period
              end
              pass = est + (cur + cost) <= cap
              ok = pass
            end
            if ok then break end
            y = y + 1
          end
          while y > we do
            local ok
            do -- sw_pass(prev, cur, cost, cap, period, x) -> pass, from sliding_window.lua
              local prev, cur, x = wp, wc, y - 1
              local pass
              local est
              do -- sw_estimate(prev, period, x) -> est, from sliding_window.lua
                -- the previous window's weight at elapsed x into the current one
                est = prev * (period - x) / period
              end
              pass = est + (cur + cost) <= cap
              ok = pass
            end
            if not ok then break end
            y = y - 1
          end
          retry = ws + y - now
          if life >= 0 and retry > life - now then retry = life - now end
          if retry < 0 then retry = 0 end
        end
      end
    end
    if remaining < 0 then remaining = 0 end
    if allowed == 1 then
      local _
      do -- sw_write(key, start, period, cur, prev, reset, held, server, f) -> done, from sliding_window.lua
        local cur, f = total, intf
        local done
        -- stores the counts of the window [start, start + period) and the one
        -- before, expiring in reset µs, integers formatted with f. When the key
        -- holds that window with a count (held), it expires at start + 2 periods
        -- already: on the server's clock only the count changes.
        if held and server then
          redis.call('HSET', key, 'c', string.format(f, cur))
        else
          redis.call('HSET', key, 's', string.format(f, start), 'e', string.format(f, start + period),
            'c', string.format(f, cur), 'p', string.format(f, prev))
          redis.call('PEXPIRE', key, string.format(f, floor((reset + 999) / 1000)))
        end
        done = true
        _ = done
      end
    end
    return allowed, remaining, retry, reset
  end
end
-- Token bucket, one check, the common case written flat: a key that holds
-- no state, or state written under the same limit ("<r>/<tau>").
-- token_bucket_fast makes token_bucket's decision on key with
-- ARGV[b..b+4] (capacity, period, r, u, cost) at now (on the server's
-- clock when server is true) with its arithmetic, inline, and returns
-- allowed, remaining, retry_after, reset_after as one.lua replies them;
-- in any other case it returns nothing and writes nothing, and the
-- general code decides (it defines no function, and is defined before
-- them). intf (fast.lua) formats integers. Each fast function parses the
-- numbers at one position b once per script: a batch's calls of the same
-- limit share one position (batch.lua), and parsing costs.
local tb_b, tb_cap, tb_r, tb_u, tb_cost, tb_rtau
local function token_bucket_fast(key, b, now, server)
  local floor = math.floor
  local v = redis.call('HMGET', key, 'm', 'r', 'ts')
  local m, ts = tonumber(v[1]), tonumber(v[3])
  if b ~= tb_b then
    tb_b, tb_cap, tb_r, tb_u, tb_cost = b, tonumber(ARGV[b]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
    local tau
    do -- bucket_tau(cap, u, r) -> tau, from gcra.lua
      local cap, u, r = tb_cap, tb_u, tb_r
      -- the full window of a limit, ceil(cap*u/r) µs: the time its empty
      -- bucket takes to refill, which every bucket key stores (calc.Tau)
      tau = floor((cap * u + r - 1) / r)
    end
    -- the r field of this limit: its refill and full window
    tb_rtau = ARGV[b + 2] .. '/' .. string.format(intf, tau)
  end
  local cap, r, u, cost = tb_cap, tb_r, tb_u, tb_cost
  local diff
  if not ts then
    diff = 0
  elseif m and v[2] == tb_rtau then
    -- full at ts + m/r µs
    do -- bucket_same_debt(a, b, now, r) -> diff, from gcra.lua
      local a, b = ts + floor(m / r), m % r
      -- the time-debt at now, in 1/r µs, of a key that is full at the instant a
      -- + b/r µs, under the limit that wrote it: never cut (more than a full
      -- bucket means that the clock went back, and the key waits for it)
      diff = 0
      if a >= now then diff = (a - now) * r + b end
    end
  end
  if diff then
    local allowed, remaining, retry, reset, nxt
    do -- bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt, from gcra.lua
      -- a check of cost units against a bucket diff scaled units from full
      -- (calc's bucket): allowed (1/0), remaining (below 0 after the clock went
      -- back: callers clamp), retry_after and reset_after µs, and when allowed
      -- the debt it leaves, nxt
      local full = cap * u
      remaining, retry, nxt = floor((full - diff) / u), 0, diff + cost * u
      if cost <= cap and nxt <= full then
        allowed, remaining, reset = 1, floor((full - nxt) / u), floor((nxt + r - 1) / r)
      else
        allowed, reset = 0, floor((diff + r - 1) / r)
        -- a cost above the capacity never fits: retry 0
        if cost <= cap then retry = floor((nxt - full + r - 1) / r) end
      end
    end
    if remaining < 0 then remaining = 0 end
    if allowed == 1 then
      -- token_bucket_write(key, nxt, r, now, reset, tau, server)
      if ts then -- it holds this r already (see above)
        redis.call('HSET', key, 'm', string.format(intf, nxt), 'ts', string.format(intf, now))
      else
        redis.call('HSET', key, 'm', string.format(intf, nxt), 'r', tb_rtau, 'ts', string.format(intf, now))
      end
      local ttl
      do -- bucket_ttl(reset, server) -> ttl, from gcra.lua
        -- the TTL in ms of a bucket key full in reset µs: rounded up to the ms,
        -- and, written at a now that is not the server's clock, 1000 ms more
        -- (calc.ExpiryMargin). A TTL is relative: Redis turns it into an instant
        -- on its own clock when the key is written, and a replica, a failover
        -- and a failback keep that instant (Redis 7 replicates PXAT/PEXPIREAT).
        -- On the server's clock the state's instants (a TAT, a ts) are on that
        -- same clock, so whatever node holds the key, whatever its clock, the key
        -- expires exactly when its state reads full there. An injected now is not
        -- the clock that turns the TTL into an instant: a key written on a clock
        -- that runs ahead of the one that later reads it (a client clock stepping
        -- back, an instance whose clock is behind another's) expires that much
        -- before its state is full on the reader's clock, whose step back then
        -- creates capacity where the state would have made it wait; a step
        -- forward afterwards refills again. The margin keeps such a key until
        -- its state is full on any clock up to a second behind its writer's.
        -- (Redis before 7, whose replicas turn a replicated TTL into an instant
        -- on their own clock, and MIGRATE, which sends a relative TTL, do the
        -- same on the server's clock: a node whose clock is s behind lets such a
        -- key expire up to s early, at most s of refill, never more than the
        -- key's capacity.)
        ttl = floor((reset + 999) / 1000)
        if not server then ttl = ttl + 1000 end
      end
      redis.call('PEXPIRE', key, string.format(intf, ttl))
    end
    return allowed, remaining, retry, reset
  end
end
-- Calls whose checks are all GCRA's (modes 0 and 2) are decided as
-- gcra_check decides one check, with each key's TAT read once and
-- written once while calls of that kind follow one another: tats holds
-- the TAT as stored (false: no state) of the keys read, dirty the PX in
-- ms of those to write, in order. A call of another kind, or a case the
-- flat path does not decide, first writes them all (flush,
-- batch_state.lua) and forgets them. Writing a key's TAT at the end of
-- such a run leaves the state that writing it at each call would: the
-- last value written, and the same expiry (the time of the commands of a
-- script is the time it started, since Redis 7).

-- gcra_eval evaluates, without writing, the GCRA check of key whose ARGV
-- starts at ARGV[a] at now, as gcra does, reading its TAT through tats. It
-- returns nothing if that is not the common case (see gcra_check); else
-- allowed, remaining, retry_after, reset_after (remaining may be below 0
-- after the clock went back: callers clamp), then the remaining and
-- reset_after of the state as it is, then, when allowed, the debt, r and
-- the value's suffixes ("/<tau>", and ":<r>/<tau>" for r ~= 1) to write.
local function gcra_eval(key, a, now)
  local v = tats[key]
  if v == nil then
    v = redis.call('GET', key)
    tats[key] = v
  end
  local cap, r, u, cost = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local tau
  do -- bucket_tau(cap, u, r) -> tau, from gcra.lua
    -- the full window of a limit, ceil(cap*u/r) µs: the time its empty
    -- bucket takes to refill, which every bucket key stores (calc.Tau)
    tau = floor((cap * u + r - 1) / r)
  end
  local sfx, rsfx = '/' .. string.format(intf, tau), nil
  if r ~= 1 then rsfx = ':' .. ARGV[a + 3] .. sfx end
  local ta, tb = nil, 0
  if v then
    do -- gcra_parse(v, sfx, rsfx) -> a, b, from gcra.lua
      local a, b
      -- a value written under this limit, whose full window's suffix is sfx
      -- ("/<tau>"), and whose TAT has no fraction ("<a>/<tau>") or one counted
      -- in this limit's r ("<a>:<b>:<r>/<tau>": rsfx is ":<r>/<tau>", nil when
      -- r is 1; it holds no magic character of a pattern): its TAT's whole µs a
      -- and fraction b; a is nil for any other value (another limit's, an older
      -- form, not a TAT), which only the general code (gcra_tat, bucket_debt)
      -- reads. Every call of a library function costs Redis about a thousand
      -- instructions: a value with a fraction is matched once, its digits
      -- turned into numbers by arithmetic (they are digits: no tonumber call).
      a, b = nil, 0
      local sa, sb
      if rsfx then sa, sb = string.match(v, '^(%d+):(%d+)' .. rsfx .. '$') end
      if sa then
        a, b = sa + 0, sb + 0
      elseif #v > #sfx and string.find(v, sfx, -#sfx, true) then
        a = tonumber(string.sub(v, 1, -#sfx - 1))
      end
      ta, tb = a, b
    end
    if not ta then return end
  end
  local diff = 0
  if ta then
    do -- bucket_same_debt(a, b, now, r) -> diff, from gcra.lua
      local a, b = ta, tb
      -- the time-debt at now, in 1/r µs, of a key that is full at the instant a
      -- + b/r µs, under the limit that wrote it: never cut (more than a full
      -- bucket means that the clock went back, and the key waits for it)
      diff = 0
      if a >= now then diff = (a - now) * r + b end
    end
  end
  local allowed, remaining, retry, reset, nxt
  do -- bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt, from gcra.lua
    -- a check of cost units against a bucket diff scaled units from full
    -- (calc's bucket): allowed (1/0), remaining (below 0 after the clock went
    -- back: callers clamp), retry_after and reset_after µs, and when allowed
    -- the debt it leaves, nxt
    local full = cap * u
    remaining, retry, nxt = floor((full - diff) / u), 0, diff + cost * u
    if cost <= cap and nxt <= full then
      allowed, remaining, reset = 1, floor((full - nxt) / u), floor((nxt + r - 1) / r)
    else
      allowed, reset = 0, floor((diff + r - 1) / r)
      -- a cost above the capacity never fits: retry 0
      if cost <= cap then retry = floor((nxt - full + r - 1) / r) end
    end
  end
  -- the state as it is: a cost that never fits
  local _, left, _, until_full, _
  do -- bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt, from gcra.lua
    local cost = cap + 1
    local allowed, remaining, retry, reset, nxt
    -- a check of cost units against a bucket diff scaled units from full
    -- (calc's bucket): allowed (1/0), remaining (below 0 after the clock went
    -- back: callers clamp), retry_after and reset_after µs, and when allowed
    -- the debt it leaves, nxt
    local full = cap * u
    remaining, retry, nxt = floor((full - diff) / u), 0, diff + cost * u
    if cost <= cap and nxt <= full then
      allowed, remaining, reset = 1, floor((full - nxt) / u), floor((nxt + r - 1) / r)
    else
      allowed, reset = 0, floor((diff + r - 1) / r)
      -- a cost above the capacity never fits: retry 0
      if cost <= cap then retry = floor((nxt - full + r - 1) / r) end
    end
    _, left, _, until_full, _ = allowed, remaining, retry, reset, nxt
  end
  return allowed, remaining, retry, reset, left, until_full, nxt, r, sfx, rsfx
end

-- gcra_defer is gcra_write(key, nxt, r, now, tau), deferred: the TAT
-- (followed by sfx, "/<tau>", or with a fraction rsfx, ":<r>/<tau>"),
-- full in reset µs, goes to tats and dirty.
local function gcra_defer(key, nxt, r, reset, now, sfx, rsfx, server)
  local value, f
  do -- gcra_value(nxt, r, now, sfx, rsfx) -> value, f, from gcra.lua
    -- the value of a TAT now + nxt/r µs under the limit whose suffixes are
    -- sfx ("/<tau>") and rsfx (":<r>/<tau>", unused when r is 1): "<a>" ..
    -- sfx, or "<a>:<b>" .. rsfx with a fraction b. Its integers are written
    -- with '%d' where the TAT's length proves it exact (a µs on the server's
    -- clock has 16 digits; see lua/doc.go), else with '%.0f': f says which,
    -- for the caller's other integers
    f = '%d'
    local at, frac = now + floor(nxt / r), nxt % r
    value = string.format(f, at)
    if #value < 12 then
      f = '%.0f'
      value = string.format(f, at)
    end
    if frac ~= 0 then
      value = value .. ':' .. string.format(f, frac) .. rsfx
    else
      value = value .. sfx
    end
  end
  local ttl
  do -- bucket_ttl(reset, server) -> ttl, from gcra.lua
    -- the TTL in ms of a bucket key full in reset µs: rounded up to the ms,
    -- and, written at a now that is not the server's clock, 1000 ms more
    -- (calc.ExpiryMargin). A TTL is relative: Redis turns it into an instant
    -- on its own clock when the key is written, and a replica, a failover
    -- and a failback keep that instant (Redis 7 replicates PXAT/PEXPIREAT).
    -- On the server's clock the state's instants (a TAT, a ts) are on that
    -- same clock, so whatever node holds the key, whatever its clock, the key
    -- expires exactly when its state reads full there. An injected now is not
    -- the clock that turns the TTL into an instant: a key written on a clock
    -- that runs ahead of the one that later reads it (a client clock stepping
    -- back, an instance whose clock is behind another's) expires that much
    -- before its state is full on the reader's clock, whose step back then
    -- creates capacity where the state would have made it wait; a step
    -- forward afterwards refills again. The margin keeps such a key until
    -- its state is full on any clock up to a second behind its writer's.
    -- (Redis before 7, whose replicas turn a replicated TTL into an instant
    -- on their own clock, and MIGRATE, which sends a relative TTL, do the
    -- same on the server's clock: a node whose clock is s behind lets such a
    -- key expire up to s early, at most s of refill, never more than the
    -- key's capacity.)
    ttl = floor((reset + 999) / 1000)
    if not server then ttl = ttl + 1000 end
  end
  tats[key] = value
  if not dirty[key] then order[#order + 1] = key end
  dirty[key] = string.format(f, ttl)
end

-- gcra_call decides the call of n GCRA checks (one.lua's decision for one,
-- dispatch.lua's for several; modes 0 and 2) through gcra_eval and
-- gcra_defer, at reply[o+1], and reports whether it did: not if a check is
-- not the common case, and then it has written nothing.
local function gcra_call(n, now, mode, k, a, o, server)
  if n == 1 then
    local allowed, remaining, retry, reset, _, _, nxt, r, sfx, rsfx = gcra_eval(KEYS[k], a, now)
    if not allowed then return false end
    if allowed == 1 then
      gcra_defer(KEYS[k], nxt, r, reset, now, sfx, rsfx, server)
    elseif mode == 2 and redis.call('EXISTS', KEYS[k + 1]) == 1 then
      allowed = 2
    end
    if remaining < 0 then remaining = 0 end
    reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4] = allowed, remaining, retry, reset
    return true
  end
  local out, all = {}, true
  for i = 1, n do
    local e = {gcra_eval(KEYS[k + i - 1], a + 6 * (i - 1), now)}
    if not e[1] then return false end
    if e[1] ~= 1 then all = false end
    out[i] = e
  end
  for i = 1, n do
    local e, p = out[i], o + 4 * (i - 1)
    local allowed, remaining, retry, reset = e[1], e[2], e[3], e[4]
    if all then
      gcra_defer(KEYS[k + i - 1], e[7], e[8], reset, now, e[9], e[10], server)
    elseif allowed == 1 then
      -- nothing is consumed: a passing check reports its state as it is
      remaining, reset = e[5], e[6]
    elseif mode == 2 and redis.call('EXISTS', KEYS[k + n + i - 1]) == 1 then
      allowed = 2
    end
    if remaining < 0 then remaining = 0 end
    reply[p + 1], reply[p + 2], reply[p + 3], reply[p + 4] = allowed, remaining, retry, reset
  end
  return true
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
local checks, writes, fasts, gcra_call = {[1] = fixed_window, [2] = sliding_log, [3] = sliding_window, [4] = token_bucket, [5] = gcra, [6] = concurrency}, {[1] = fixed_window_write, [2] = sliding_log_write, [3] = sliding_window_write, [4] = token_bucket_write, [5] = gcra_write, [6] = concurrency_write}, {[1] = fixed_window_fast, [3] = sliding_window_fast, [4] = token_bucket_fast}, gcra_call

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
