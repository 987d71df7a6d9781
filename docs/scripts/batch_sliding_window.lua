-- batch_sliding_window.lua: generated from the sources in lua/ by
-- go test ./lua -run TestScriptFiles -update; do not edit.
--
-- Decides several queued calls whose checks are all sliding_window, one after
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
-- SHA1 d57c58281563c0ce53e9311520e5434d8b136621 (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from these sections of lua/, in order (<file>.<section>, or a
-- whole <file>), their formulas inlined where they say --@ inline:
--   batch_state, fast, sliding_window.fast, batch_fast, prelude,
--   sliding_window.functions, batch
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
-- One-check calls at the head of a batch of one algorithm whose fast path
-- is a function (fixed_window, sliding_window, token_bucket), the common
-- case, decided flat before the prelude and the algorithm are defined
-- (each function a script defines costs on every call of it): it follows
-- batch_state.lua, fast.lua (intf) and the algorithm's fast function (its
-- section fast), which the recipe names, fast, with its number as ARGV
-- sends it, fast_alg; the rest of the batch script follows it.
--
-- While the next call is one check of that algorithm (n = 1 with that
-- number, or n = 0: the numbers of the last call, decided here) on one
-- server or a sharded client (modes 0 and 2), it is decided by the fast
-- function exactly as batch.lua's one() decides it through `fasts`: the
-- same function on the same ARGV and now, the pending marker's EXISTS
-- when a sharded call is denied, remaining clamped at 0. The first call
-- that is not such a call, that the fast function does not decide (it
-- returns nothing, having written nothing), or whose key's command fails
-- (a key of another type: the fast function raises before it writes,
-- pcall catches it) is left, undecided, to batch.lua's loop, which goes on
-- from k, a, o and last as its own loop leaves them; so is every call
-- after it. These algorithms write their state as they decide, so there is
-- nothing to flush: when every call is decided the reply is returned at
-- once. batch_state.lua declares the state (t, reply, k, a, o, last).
local fast, fast_alg = sliding_window_fast, '3'
do
  local na = #ARGV
  while a <= na do
    -- n is 0 when the call's numbers are the last call's, at ARGV[last]
    local same = ARGV[a] == '0'
    if not same and (ARGV[a] ~= '1' or ARGV[a + 3] ~= fast_alg) then break end
    local mode = ARGV[a + 2]
    if mode ~= '0' and mode ~= '2' then break end
    local now = call_now(ARGV[a + 1])
    -- c: where the call's check's numbers are in ARGV (batch.lua's c)
    local c = last
    if not same then c = a + 3 end
    local ok, allowed, remaining, retry, reset = pcall(fast, KEYS[k], c + 1, now, ARGV[a + 1] == '0')
    if not ok or not allowed then break end
    if allowed ~= 1 and mode == '2' and redis.call('EXISTS', KEYS[k + 1]) == 1 then allowed = 2 end
    if remaining < 0 then remaining = 0 end
    reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4] = allowed, remaining, retry, reset
    o = o + 4
    if same then
      a = a + 3
    else
      last, a = c, a + 9
    end
    if mode == '0' then k = k + 1 else k = k + 2 end
  end
end
-- Every call decided, before anything else is defined.
if a > #ARGV then return reply end
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
local checks, writes, fasts, gcra_call = {[3] = sliding_window}, {[3] = sliding_window_write}, {[3] = sliding_window_fast}, nil

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
