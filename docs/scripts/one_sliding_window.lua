-- one_sliding_window.lua: generated from the sources in lua/ by
-- go test ./lua -run TestScriptFiles -update; do not edit.
--
-- Decides one sliding_window check: the common call, a script of its own holding only this algorithm.
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
-- SHA1 a66616c64edd8db4d1eac2cd42ec54c92712ea01 (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from these sections of lua/, in order (<file>.<section>, or a
-- whole <file>), their formulas inlined where they say --@ inline:
--   now, fast, sliding_window.fast, one_fast, prelude,
--   sliding_window.functions, one
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
-- The fast path of a one-check script whose algorithm's fast path is a
-- function (the script's recipe names it, fast): it decides the common
-- case, and a call whose part of a call spanning slots (KEYS[3]) must set
-- markers goes to the general code. See one.lua for KEYS, ARGV and the
-- reply, which here leaves out the now: the Go side needs it only from a
-- call with a commit marker.
local fast = sliding_window_fast
if not KEYS[3] then
  local allowed, remaining, retry, reset = fast(KEYS[1], 2, now, ARGV[1] == '0')
  if allowed then
    if allowed ~= 1 and KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then allowed = 2 end
    if remaining < 0 then remaining = 0 end
    return {allowed, remaining, retry, reset}
  end
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
local check, alg = sliding_window, '3'
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
