-- one_gcra.lua: generated from the sources in lua/ by
-- go test ./lua -run TestScriptFiles -update; do not edit.
--
-- Decides one gcra check: the common call, a script of its own holding only this algorithm.
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
-- SHA1 11aa9e1fe2385730bd2dafa9039243c7e1103711 (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from these sections of lua/, in order (<file>.<section>, or a
-- whole <file>), their formulas inlined where they say --@ inline:
--   now, fast, gcra.one, prelude, gcra.bucket, gcra.functions, one
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
-- GCRA's one-check script starts here: a check with no marker keys is
-- decided flat (gcra_check), before any function is defined; what it
-- leaves falls through to the general script after it (the functions of
-- the prelude and of gcra.lua are defined only then: each definition
-- costs on every call that reaches it). now.lua has read now, fast.lua
-- defined intf.
if not KEYS[2] then
  local floor = math.floor
  local cap, r, u = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
  local tau
  do -- bucket_tau(cap, u, r) -> tau, from gcra.lua
    -- the full window of a limit, ceil(cap*u/r) µs: the time its empty
    -- bucket takes to refill, which every bucket key stores (calc.Tau)
    tau = floor((cap * u + r - 1) / r)
  end
  -- a value of this limit ends with its full window: "<tat>/<tau>", or
  -- "<a>:<b>:<r>/<tau>" with a fraction
  local sfx, rsfx = '/' .. string.format(intf, tau), nil
  if r ~= 1 then rsfx = ':' .. ARGV[4] .. sfx end
  local reply
  do -- gcra_check(key, cap, r, u, cost, sfx, rsfx, server, now) -> reply, from gcra.lua
    local key, cost, server = KEYS[1], tonumber(ARGV[6]), ARGV[1] == '0'
    -- one check, the common case: a key that is absent or holds a value of
    -- this limit (gcra_parse) is decided here, from GET, TIME (only when now
    -- is nil, once the value is known to be decided here) and its SET, and
    -- replied as one.lua's fast paths reply ({allowed, remaining, retry_after,
    -- reset_after}, no now); reply is nil, nothing written, for any other
    -- value, which the general code decides
    local v = redis.call('GET', key)
    local a, b = nil, 0
    if v then
      do -- gcra_parse(v, sfx, rsfx) -> a, b, from gcra.lua
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
      end
    end
    if not v or a then
      local t = now
      if not t then
        local tt = redis.call('TIME')
        t = tt[1] * 1000000 + tt[2]
      end
      local diff = 0
      if a then
        do -- bucket_same_debt(a, b, now, r) -> diff, from gcra.lua
          local now = t
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
      if remaining < 0 then remaining = 0 end
      if allowed == 1 then
        local value, f
        do -- gcra_value(nxt, r, now, sfx, rsfx) -> value, f, from gcra.lua
          local now = t
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
        redis.call('SET', key, value, 'PX', string.format(f, ttl))
      end
      reply = {allowed, remaining, retry, reset}
    end
  end
  if reply then return reply end
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
local check, alg = gcra, '5'
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
