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
-- SHA1 ea4652411b6af03bc6f32da96b5e647e35d08e84 (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from, in order: fixed_window_flat.lua, fixed_window_count.lua, fixed_window_flat_end.lua, fast.lua, fixed_window_one.lua, one_fast.lua, now.lua, prelude.lua, fixed_window.lua, one.lua,
-- joined with the glue lines of lua.go. The sources' headers say more.
-- ---- the script, as sent ----
-- The fixed window's one-check script starts here: a check on the
-- server's clock with a period of whole ms, not a part of a call spanning
-- slots (KEYS[3]), and whose cost can fit, is decided flat, before any
-- function is defined, by fixed_window_count.lua (the commands
-- ulule/limiter's counter needs: INCRBY then PTTL), which follows, and
-- replied by fixed_window_flat_end.lua, which closes this block. What
-- fixed_window_count.lua leaves goes on to fixed_window_fast, then the
-- general code. See one.lua for KEYS, ARGV and the reply, which leaves out
-- the now, as one_fast.lua's.
if ARGV[1] == '0' and not KEYS[3] then
  local key, cap, period, cost = KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[6]
  local ncost = tonumber(cost)
  if ncost <= cap and period % 1000 == 0 then
    local count, reset
-- The fixed window's common case on the server's clock, written once for
-- the two scripts that start with it: the one-check script
-- (fixed_window_flat.lua before it, fixed_window_flat_end.lua after) and
-- the lean script (fixed_window_lean.lua before it). They declare key, cap
-- (a number, or the lean script's ARGV, read only when a key's window is
-- current), period (µs, a whole number of ms), cost (as sent: an integer
-- string, which INCRBY and DECRBY get without formatting a Lua number
-- again) and ncost (the cost as a number), and the locals count and reset, which this sets for a check it
-- decides: the key's count with the cost added (allowed if and only if it
-- is at most cap; a denial took its units back with DECRBY, so a denied
-- check consumes nothing) and reset_after in µs. The key is a string whose
-- TTL ends with its window (see fixed_window.lua): a key with a TTL is the
-- current window, and the check reads no clock. A key INCRBY created (no
-- TTL, count = cost) starts a window: TIME, and its expiry at the
-- window's last ms (PEXPIREAT, as fixed_window_fast sets it), with NX
-- (Redis 7), so that a window refunds emptied (count = cost again, its
-- TTL kept) keeps its own end, which PTTL then reads; that costs a new
-- key no PTTL. Redis 6 refuses NX: PTTL tells the two apart. Anything
-- else (a hash: INCRBY fails; a string with no TTL that was there before)
-- is left unchanged, count nil, to what follows.
local c = redis.pcall('INCRBY', key, cost)
if type(c) == 'number' then
  local set, now, stop = 0
  if c == ncost then
    -- the period read once: an ARGV string is parsed at each use
    local t, p = redis.call('TIME'), period + 0
    now = t[1] * 1000000 + t[2]
    stop = now - now % p + p
    -- the window's last ms, with '%d' where its length proves it exact
    -- (a ms on the server's clock has 13 digits; see lua/doc.go)
    local ms = stop / 1000 - 1
    local last = string.format('%d', ms)
    if #last < 12 then last = string.format('%.0f', ms) end
    set = redis.pcall('PEXPIREAT', key, last, 'NX')
  end
  if set == 1 then
    count, reset = c, stop - now
  else
    local ttl = redis.call('PTTL', key)
    if ttl >= 0 then
      if c > tonumber(cap) then redis.call('DECRBY', key, cost) end
      count, reset = c, (ttl + 1) * 1000
    elseif c == ncost then
      -- Redis 6: no TTL, so a window starts
      redis.call('PEXPIREAT', key, stop / 1000 - 1)
      count, reset = c, stop - now
    else
      redis.call('DECRBY', key, cost)
    end
  end
end
    -- fixed_window_count.lua decided: the reply of one.lua's fast paths
    -- (a denial while the key's pending marker exists is 2: a refund may
    -- still undo it)
    if count then
      if count <= cap then return {1, cap - count, 0, reset} end
      local allowed = 0
      if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then allowed = 2 end
      local remaining = cap - count + ncost
      if remaining < 0 then remaining = 0 end
      return {allowed, remaining, reset, reset}
    end
  end
end
-- intf formats the integers that the flat fast paths (<algorithm>_one.lua,
-- batch.lua) write: '%d', which is faster, where Lua's C long holds 2^53,
-- else '%.0f'; both write an integer below 2^53 alike.
local intf = string.format('%d', 9007199254740992) == '9007199254740992' and '%d' or '%.0f'
-- Fixed window, one check, the common case written flat. On the server's
-- clock (server true) with a period of whole ms, the key is a string
-- whose TTL ends with its window (see fixed_window.lua): an existing key
-- is read with GET and PTTL, no clock, and an allowed check adds with
-- INCRBY, which keeps the TTL; no key starts a window, reading TIME if now
-- is nil. Its expiry is set with PXAT to the window's last ms: Redis keeps
-- a key while its clock in ms has not passed that ms, so exactly until the
-- window ends; reset_after is then the TTL + 1 ms, at most 1 ms over the
-- µs. A key that holds a hash (an older layout, a calendar quota's window,
-- a client clock's write) is left to the general code, which reads it and
-- rewrites it as a string. On a client's clock, the key holds a hash: a
-- key that holds no state, or a window stored under the same period (not a
-- calendar quota's window of the same length), is decided here as
-- fixed_window decides it, and the TTL is set again from the writer's now
-- (a TTL set by another client whose clock runs ahead would end the window
-- early). The function returns nothing, having written nothing, for what
-- it leaves to the general code.
local fw_b, fw_cap, fw_period, fw_cost -- its numbers at b (see token_bucket_one.lua)
local function fixed_window_fast(key, b, now, server)
  if b ~= fw_b then
    fw_b, fw_cap, fw_period, fw_cost = b, tonumber(ARGV[b]), tonumber(ARGV[b + 1]), tonumber(ARGV[b + 4])
  end
  local period = fw_period
  if server and period % 1000 == 0 then
    local v = redis.pcall('GET', key)
    if type(v) == 'table' then return end -- a hash
    local cap, cost = fw_cap, fw_cost
    if v then
      local c = tonumber(v)
      if not c then return end
      local ttl = redis.call('PTTL', key)
      if ttl < 0 then return end
      local reset = (ttl + 1) * 1000
      local remaining = cap - c
      if remaining < 0 then remaining = 0 end
      if cost > cap then return 0, remaining, 0, reset end
      if c + cost > cap then return 0, remaining, reset, reset end
      -- the cost as sent, not a number to format again (see fixed_window_flat.lua)
      return 1, cap - redis.call('INCRBY', key, ARGV[b + 4]), 0, reset
    end
    if cost > cap then return 0, cap, 0, 0 end
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    local stop = (math.floor(now / period) + 1) * period
    redis.call('SET', key, string.format(intf, cost), 'PXAT', string.format(intf, stop / 1000 - 1))
    return 1, cap - cost, 0, stop - now
  end
  local v = redis.pcall('HMGET', key, 's', 'e', 'c', 'w')
  if v.err then return end -- a string: the general code
  if not now then
    -- the server's clock, for a period of no whole ms: read only now
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
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
local fast, now = fixed_window_fast, nil
if ARGV[1] ~= '0' then now = tonumber(ARGV[1]) end
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
--   <name>_refund(key, cap, period, r, u, cost, at, reset, now, mark)
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
-- scaled units, so every refill is an exact integer.
--
-- A key's state expires when it would read as a full bucket: its TTL is
-- reset_after rounded up to the ms, so a key that expires is
-- indistinguishable from a key at full capacity. A token bucket or GCRA
-- key written on a clock other than the server's (an injected now) lives
-- expiry_margin longer: see bucket_ttl.
--
-- Numbers are float64: every integer here stays below 2^53 (the Go side
-- validates limits so that it does), and every number sent back to Redis is
-- formatted with %.0f so no exponent notation reaches a key.

local floor = math.floor

-- server_clock is true while the check being decided (or refunded) has its
-- now from the server's clock (TIME), which is also the clock of TTLs.
-- The entry points that decide or write checks set it (one.lua,
-- dispatch.lua, batch.lua, refund.lua, cancel.lua, block.lua).
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

-- expiry_margin is how many ms longer than its state needs a token bucket
-- or GCRA key lives when the now it was written at is not the server's
-- clock; bucket_ttl returns the TTL, in ms (formatted), of such a key whose
-- state is full in us µs: us rounded up to the ms on the server's clock,
-- expiry_margin more on another.
--
-- A TTL is relative: Redis turns it into an instant on its own clock when
-- the key is written, and a replica, a failover and a failback keep that
-- instant (Redis 7 replicates PXAT/PEXPIREAT). On the server's clock the
-- state's instants (a TAT, a ts) are on that same clock, so whatever node
-- holds the key, whatever its clock, the key expires exactly when its
-- state reads full there. An injected now is not the clock that turns the
-- TTL into an instant: a key written on a clock that runs ahead of the one
-- that later reads it (a client clock stepping back, an instance whose
-- clock is behind another's) expires that much before its state is full
-- on the reader's clock, whose step back then creates capacity where the
-- state would have made it wait; a step forward afterwards refills again.
-- The margin keeps such a key until its state is full on any clock up to
-- expiry_margin behind its writer's. (Redis before 7, whose replicas turn
-- a replicated TTL into an instant on their own clock, and MIGRATE, which
-- sends a relative TTL, do the same on the server's clock: a node whose
-- clock is s behind lets such a key expire up to s early, at most s of
-- refill, never more than the key's capacity.)
local expiry_margin = 1000
local function bucket_ttl(us)
  local ms = ceil_div(us, 1000)
  if not server_clock then ms = ms + expiry_margin end
  return fmt(ms)
end

-- refund_debt is the time-debt, in 1/r µs, that a late refund of a
-- bucket's units gives back at now: their own, cost_debt, but no more than
-- what is left at now of the debt of the commit at at, which replied reset
-- µs to full (units the bucket refilled since are not given back again:
-- that would create capacity). calc's refundDebt is its Go twin.
local function refund_debt(cost_debt, at, reset, now, r)
  return math.max(0, math.min(cost_debt, (at + reset - now) * r))
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
-- Fixed window: two layouts, one per clock.
--
-- On the server's clock (TIME, the clock of TTLs), for a period of whole
-- ms, a key is a string, the count, whose TTL ends with its window: while
-- the key exists its window is the one it counts in, so a check of an
-- existing key reads no clock (fixed_window_one.lua); a new window reads
-- TIME once, to set the TTL. The expiry is set with PXAT to the window's
-- last ms: Redis keeps a key while its clock in ms has not passed that ms,
-- so exactly until the window ends. A count counts until its key expires,
-- whatever the period: a key written under a longer period keeps its count
-- until its window ends (at most one old period), and a clock that went
-- back finds its key held at the later window (Redis's TTLs follow the
-- same clock).
--
-- On a client's clock (Config.Now, which Redis's TTLs do not follow), or
-- for a period that is not a whole number of ms, a key is a hash {s =
-- window start µs, e = window end µs, c = count}. Windows are aligned to
-- the Unix epoch. Start and end are instants, so they mean the same under
-- any limit: the count still counts while now < e and the stored window
-- started in the current window of the current period (or later: the
-- clock went back, and the key is held at the later window), until e
-- under the period it was written with, else until e or the current
-- window's end, whichever comes first. A change of period never locks a
-- key for longer than one period of the new limit, nor beyond e (the key's
-- TTL). State written before windows were stored as instants, {w = window
-- index, c = count}, is read as a window of the current period.
--
-- Each reads the other layout (a redeploy meets hashes written before the
-- string layout, and calendar quotas share the hash), and a write turns
-- the key into the layout of its clock: a hash read on the server's clock
-- becomes a string whose TTL ends with the hash's window, count kept
-- (unless that end is not a whole ms: it stays a hash). A string read on
-- a client's clock counts until the key expires.

-- fixed_window_string returns the count of a string key and its expiry in
-- µs on the server's clock: the end of its window. It returns nothing for
-- a key without a TTL. A string that is not a count is an error of the
-- key's state. The expiry is read as an instant (PEXPIRETIME), not as a
-- PTTL added to a now read apart from it: a script held between the two
-- (a loaded server, a slow refund) would put the end early by the wait,
-- and a commit and its refund would name different windows. Redis before
-- 7 has no PEXPIRETIME: there the PTTL is added to now (when it is the
-- server's clock, else to TIME, read here), the present of the script.
local function fixed_window_string(key, v, now)
  local c = tonumber(v)
  if not c then error('fixed window key holds a string that is not a count') end
  local e = redis.pcall('PEXPIRETIME', key)
  if type(e) == 'number' then
    if e < 0 then return end
    return c, (e + 1) * 1000
  end
  local ttl = redis.call('PTTL', key)
  if ttl < 0 then return end
  if not server_clock then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return c, (floor(now / 1000) + ttl + 1) * 1000
end

-- fixed_window_write stores count units in the window [start, stop) of a
-- limit of period µs. On the server's clock, for a period and a stop of
-- whole ms, the key is a string: a write to
-- the window the string holds (same and str) leaves its TTL, which ends
-- with the window; any other sets it (and replaces a hash). Else it is a
-- hash, whose TTL is set from the writer's now: on a client's clock every
-- write sets it again (a TTL set by another client whose clock runs ahead
-- would end the window early), on the server's only a new window's; str
-- says the key holds a string, which the hash replaces.
local function fixed_window_write(key, start, stop, count, now, same, str, period)
  if server_clock and stop % 1000 == 0 and period % 1000 == 0 then
    if same and str then
      redis.call('SET', key, fmt(count), 'KEEPTTL')
    else
      redis.call('SET', key, fmt(count), 'PXAT', fmt(stop / 1000 - 1))
    end
    return
  end
  if str then redis.call('DEL', key) end
  if same and not str then
    redis.call('HSET', key, 'c', fmt(count))
    if server_clock then return end
  else
    redis.call('HSET', key, 's', fmt(start), 'e', fmt(stop), 'c', fmt(count))
  end
  pexpire(key, stop - now)
end

-- fixed_window_load returns the stored window's start, end and count, or
-- nil; whether start and end are stored as such (a hash in the current
-- form); and whether the key is a string (its start is then unknown, and
-- returned as nil, its end as its expiry, see fixed_window_string).
local function fixed_window_load(key, period, now)
  local v
  if server_clock then
    v = redis.pcall('GET', key)
    if type(v) ~= 'table' then
      if not v then return nil end
      local c, e = fixed_window_string(key, v, now)
      if not c then return nil, nil, nil, false, true end
      return nil, e, c, false, true
    end
  end
  v = redis.pcall('HMGET', key, 's', 'e', 'c', 'w')
  if v.err then
    if not server_clock then
      local c, e = fixed_window_string(key, redis.call('GET', key), now)
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

local function fixed_window(key, cap, period, _, _, cost, now, commit)
  local s, e, c, stored, str = fixed_window_load(key, period, now)
  local start = floor(now / period) * period
  local stop = start + period
  local count = 0
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
  local reset = 0
  if count > 0 then reset = stop - now end
  if cost > cap then return 0, cap - count, 0, reset end
  if count + cost > cap then return 0, cap - count, stop - now, reset end
  count = count + cost
  -- the window the key holds, unchanged
  local same = (stored and start == s and stop == e) or (str and count > cost)
  if commit then fixed_window_write(key, start, stop, count, now, same, str, period) end
  return 1, cap - count, 0, stop - now, start, stop, count, now, same, str, period
end

-- Refund: take cost back from the window a commit at at wrote. That commit
-- replied reset = end - at, which names the window by its end. If another
-- commit has moved the key to another window since, the units no longer
-- count and there is nothing to give back; else the TTL stays (the window
-- ends when it did), whenever the refund comes. A string key's end is its
-- expiry, read to the ms: the commit's window if within 1 ms of its end
-- (windows of one key end at least a period, a whole ms, apart). The
-- expiry is the key's PTTL from now, the time the refund runs: on the
-- server's clock the script's now is that clock's present, and at, the
-- commit's instant, would put the end early by the refund's delay (a
-- compensation or cancel more than 1 ms after its commit gave nothing
-- back). A string whose end is not its commit's while the commit's
-- window is still current holds a count of that window whose end
-- something else changed (a PEXPIRE of the key, a RESTORE of it with a
-- TTL turned into an instant on another clock): the count still counts,
-- but the refund cannot tell the commit's units in it; it gives nothing
-- back, and returns true so that its caller reports it. (A string with no
-- TTL counts nothing: there is nothing to give back.)
local function fixed_window_refund(key, _, period, _, _, cost, at, reset, now)
  local v = redis.pcall('GET', key)
  if type(v) ~= 'table' then
    if not v then return end
    local c, e = fixed_window_string(key, v, now)
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
  local _, e, c = fixed_window_load(key, period, now)
  if e ~= at + reset or not c then return end
  c = c - cost
  if c <= 0 then
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 'c', fmt(c))
  end
end
local check, alg = fixed_window, '1'
-- One check, the common case: a script of its own per algorithm, holding
-- only that algorithm, which the Go side joins as prelude, algorithm, a line
-- naming the algorithm's function `check` and its number `alg` (as ARGV
-- sends it to dispatch.lua), then this file.
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
    redis.call('SET', KEYS[3], fmt(now) .. ':' .. fmt(reset) .. bucket_mark(alg, KEYS[1]), 'PX', ARGV[7])
    redis.call('SET', KEYS[2], '1', 'PX', ARGV[7])
  end
elseif KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then
  allowed = 2
end
if remaining < 0 then remaining = 0 end
return {allowed, remaining, retry, reset, now}
