-- batch_fixed_window.lua: generated from the sources in lua/ by
-- go test ./lua -run TestScriptFiles -update; do not edit.
--
-- Decides several queued calls whose checks are all fixed_window, one after
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
-- SHA1 72ce803ba23791daec4689098a2ed1d9d60ec0ac (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from these sections of lua/, in order (<file>.<section>, or a
-- whole <file>), their formulas inlined where they say --@ inline:
--   batch_state, fast, fixed_window.fast, batch_fast, prelude,
--   fixed_window.string, fixed_window.functions, batch
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
local fast, fast_alg = fixed_window_fast, '1'
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
local checks, writes, fasts, gcra_call = {[1] = fixed_window}, {[1] = fixed_window_write}, {[1] = fixed_window_fast}, nil

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
