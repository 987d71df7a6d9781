-- GCRA, and the arithmetic of both bucket algorithms (GCRA and the token
-- bucket, token_bucket.lua, which stores the same instant another way and
-- decides with these formulas). algorithms/internal/calc/gcra.go is the
-- Go twin.
--
-- State: one string, the theoretical arrival time TAT = a + b/r µs (b <
-- r), the instant the bucket is full again, so the emission interval u/r
-- µs is exact, followed by the full window tau = ceil(cap*u/r) µs of the
-- limit that wrote it. It is "<a>/<tau>" when b is 0, as it always is when
-- the interval is a whole number of µs, else "<a>:<b>:<r>/<tau>", r being
-- the refill of the limit that wrote it. Values written before tau was
-- stored ("<a>", "<a>:<b>:<r>", and "<a>:<b>" read with the current r) are
-- read as written under another limit. diff = TAT - now in scaled units is
-- the key's time-debt; a check of cost n passes when diff + n*u <= cap*u.
-- Under the limit that wrote it the debt is never cut (more than a full
-- bucket means the clock went back: the key waits for it); across a change
-- of limit it is kept, cut to one full bucket of the new limit
-- (bucket_debt), as the token bucket does.
--
-- The formulas below are the arithmetic; the sections after them are the
-- code each script holds: bucket_debt, which the token bucket's general
-- code calls too (bucket), GCRA's functions in the general code (functions),
-- the flat common case that starts the one-check script (one), the lean
-- script (lean), the flat loop that starts a batch (batch) and the batch's
-- GCRA calls (batch_calls). The common case is written flat, inlined: a
-- function a script defines costs Redis on every call (see lua/doc.go).

--@ formula bucket_tau(cap, u, r) -> tau
-- the full window of a limit, ceil(cap*u/r) µs: the time its empty
-- bucket takes to refill, which every bucket key stores (calc.Tau)
tau = floor((cap * u + r - 1) / r)
--@ end

--@ formula bucket_same_debt(a, b, now, r) -> diff
-- the time-debt at now, in 1/r µs, of a key that is full at the instant a
-- + b/r µs, under the limit that wrote it: never cut (more than a full
-- bucket means that the clock went back, and the key waits for it)
diff = 0
if a >= now then diff = (a - now) * r + b end
--@ end

--@ formula bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt
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
--@ end

--@ formula bucket_ttl(reset, server) -> ttl
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
--@ end

--@ formula bucket_give(cost, u, at, reset, now, r) -> give
-- the time-debt, in 1/r µs, that a late refund of cost units gives back
-- at now: their own, but no more than what is left at now of the debt of
-- the commit at at, which replied reset µs to full (units the bucket
-- refilled since are not given back again: that would create capacity);
-- calc's refundDebt
give = math.max(0, math.min(cost * u, (at + reset - now) * r))
--@ end

--@ formula bucket_block(nxt, hold, cap, u, r, k) -> held, remaining, reset
-- a quota block of k units that a check at now found room for (it would
-- leave the debt nxt), stored as if its units arrived at now + hold, the
-- last instant they may be used: the debt becomes max(debt, hold*r) +
-- k*u, which may exceed a full bucket by up to hold (calc's Block)
held = math.max(nxt - k * u, hold * r) + k * u
remaining, reset = floor((cap * u - held) / u), floor((held + r - 1) / r)
--@ end

--@ formula gcra_parse(v, sfx, rsfx) -> a, b
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
--@ end

--@ formula gcra_value(nxt, r, now, sfx, rsfx) -> value, f
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
--@ end

--@ formula gcra_check(key, cap, r, u, cost, sfx, rsfx, server, now) -> reply
-- one check, the common case: a key that is absent or holds a value of
-- this limit (gcra_parse) is decided here, from GET, TIME (only when now
-- is nil, once the value is known to be decided here) and its SET, and
-- replied as one.lua's fast paths reply ({allowed, remaining, retry_after,
-- reset_after}, no now); reply is nil, nothing written, for any other
-- value, which the general code decides
local v = redis.call('GET', key)
local a, b = nil, 0
if v then
  --@ inline gcra_parse(v, sfx, rsfx) -> a, b
end
if not v or a then
  local t = now
  if not t then
    local tt = redis.call('TIME')
    t = tt[1] * 1000000 + tt[2]
  end
  local diff = 0
  if a then
    --@ inline bucket_same_debt(a, b, t, r) -> diff
  end
  --@ inline local bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt
  if remaining < 0 then remaining = 0 end
  if allowed == 1 then
    --@ inline local gcra_value(nxt, r, t, sfx, rsfx) -> value, f
    --@ inline local bucket_ttl(reset, server) -> ttl
    redis.call('SET', key, value, 'PX', string.format(f, ttl))
  end
  reply = {allowed, remaining, retry, reset}
end
--@ end

--@ section bucket
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
  --@ inline local bucket_same_debt(a, b, now, r) -> diff
  if diff > full and not same then return full, true end
  return diff, false
end
--@ end

--@ section functions
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
  --@ inline local gcra_value(diff, r, now, sfx, ':' .. fmt(r) .. sfx) -> value, f
  --@ inline local bucket_ttl(ceil_div(diff, r), server) -> ttl
  redis.call('SET', key, value, 'PX', string.format(f, ttl))
end

local function gcra(key, cap, _, r, u, cost, now, commit, server)
  -- diff: 0 for no state or a TAT in the past (a full bucket)
  --@ inline local bucket_tau(cap, u, r) -> tau
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
  --@ inline local bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt
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
  --@ inline local bucket_tau(cap, u, r) -> tau
  local a, b, rs, tw = gcra_tat(v, r)
  if not (a and b and rs) then return end
  local since, rec = refund_since(key, mark, at, reset)
  --@ inline local bucket_give(cost, u, at, reset - since, now, r) -> give
  refund_add(rec, ceil_div(give, r), now, tau)
  local diff = bucket_debt(a, b, rs, now, r, cap * u, tw == tau) - give
  if diff <= 0 then
    redis.call('DEL', key)
    return
  end
  gcra_write(key, diff, r, now, tau, server)
end
--@ end

--@ section one
-- GCRA's one-check script starts here: a check with no marker keys is
-- decided flat (gcra_check), before any function is defined; what it
-- leaves falls through to the general script after it (the functions of
-- the prelude and of gcra.lua are defined only then: each definition
-- costs on every call that reaches it). now.lua has read now, fast.lua
-- defined intf.
if not KEYS[2] then
  local floor = math.floor
  local cap, r, u = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
  --@ inline local bucket_tau(cap, u, r) -> tau
  -- a value of this limit ends with its full window: "<tat>/<tau>", or
  -- "<a>:<b>:<r>/<tau>" with a fraction
  local sfx, rsfx = '/' .. string.format(intf, tau), nil
  if r ~= 1 then rsfx = ':' .. ARGV[4] .. sfx end
  --@ inline local gcra_check(KEYS[1], cap, r, u, tonumber(ARGV[6]), sfx, rsfx, ARGV[1] == '0', now) -> reply
  if reply then return reply end
end
--@ end

--@ section lean
-- GCRA's lean script: one check on the server's clock, no marker keys,
-- decided by gcra_check as the one-check script decides it, with only
-- the numbers it needs (see lean_fixed_window's header for why) and the
-- stored value's suffix computed once on the Go side rather than
-- formatted on every call.
--
-- KEYS[1]   the storage key (see gcra.lua)
-- ARGV[1]   capacity (the burst)
-- ARGV[2]   u, one unit in scaled units (see calc.Params)
-- ARGV[3]   the stored value's suffix: '/' .. tau, tau = ceil(capacity * u / r)
-- ARGV[4]   r, the refill in scaled units per µs, when it is not 1 (an
--           emission interval of no whole µs) or the cost is sent
-- ARGV[5]   the cost, when it is not 1
--
-- Reply: allowed (0 or 1), remaining, retry_after µs, reset_after µs, as
-- one.lua's fast paths reply; or an empty reply, having written nothing,
-- for a value gcra_check leaves to the general code (another limit's, or
-- not a TAT), which the algorithm's one-check script then decides.
--
-- The numbers, integers the Go side formats, are turned into numbers by
-- arithmetic rather than tonumber: a call of a library function costs
-- Redis about a thousand instructions.
local floor = math.floor
local sfx, rsfx, r, cost = ARGV[3], nil, 1, 1
if ARGV[4] then
  r = ARGV[4] + 0
  -- the suffix of a value with a fraction: ":<r>/<tau>"
  if r ~= 1 then rsfx = ':' .. ARGV[4] .. sfx end
  if ARGV[5] then cost = ARGV[5] + 0 end
end
--@ inline local gcra_check(KEYS[1], ARGV[1] + 0, r, ARGV[2] + 0, cost, sfx, rsfx, true, nil) -> reply
if reply then return reply end
return {}
--@ end

--@ section batch
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
        --@ inline bucket_tau(cap, u, r) -> tau
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
      --@ inline gcra_parse(v, sfx, rsfx) -> ta, tb
      if not ta then break end
    end
    local now = call_now(ARGV[a + 1])
    if not same then last = a + 3 end
    local diff = 0
    if ta then
      --@ inline bucket_same_debt(ta, tb, now, r) -> diff
    end
    tats[key] = v
    --@ inline local bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt
    if remaining < 0 then remaining = 0 end
    if allowed == 1 then
      -- gcra_defer (batch_calls below): the value, written at the end
      --@ inline local gcra_value(nxt, r, now, sfx, rsfx) -> value, f
      --@ inline local bucket_ttl(reset, ARGV[a + 1] == '0') -> ttl
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
--@ end

--@ section batch_calls
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
  --@ inline local bucket_tau(cap, u, r) -> tau
  local sfx, rsfx = '/' .. string.format(intf, tau), nil
  if r ~= 1 then rsfx = ':' .. ARGV[a + 3] .. sfx end
  local ta, tb = nil, 0
  if v then
    --@ inline gcra_parse(v, sfx, rsfx) -> ta, tb
    if not ta then return end
  end
  local diff = 0
  if ta then
    --@ inline bucket_same_debt(ta, tb, now, r) -> diff
  end
  --@ inline local bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt
  -- the state as it is: a cost that never fits
  --@ inline local bucket_decide(diff, cap, u, r, cap + 1) -> _, left, _, until_full, _
  return allowed, remaining, retry, reset, left, until_full, nxt, r, sfx, rsfx
end

-- gcra_defer is gcra_write(key, nxt, r, now, tau), deferred: the TAT
-- (followed by sfx, "/<tau>", or with a fraction rsfx, ":<r>/<tau>"),
-- full in reset µs, goes to tats and dirty.
local function gcra_defer(key, nxt, r, reset, now, sfx, rsfx, server)
  --@ inline local gcra_value(nxt, r, now, sfx, rsfx) -> value, f
  --@ inline local bucket_ttl(reset, server) -> ttl
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
--@ end
