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
-- SHA1 daebe2dec2c999e2784057a0b6db0f1d5ad1cc50 (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from these sections of lua/, in order (<file>.<section>, or a
-- whole <file>), their formulas inlined where they say --@ inline:
--   fixed_window.one, now, prelude, fixed_window.string,
--   fixed_window.functions, one
-- ---- the script, as sent ----
-- The fixed window's one-check script starts here: a check that is not a
-- part of a call spanning slots (KEYS[3]) is decided flat, before any
-- function is defined: on the server's clock, for a period of whole ms
-- and a cost that can fit, by fw_count (the commands ulule/limiter's
-- counter needs: INCRBY then PTTL); else, a hash or no state, by
-- fw_hash_check. What they leave goes on to the general code. See one.lua
-- for KEYS, ARGV and the reply, which leaves out the now, as
-- one_fast.lua's.
if not KEYS[3] then
  local floor = math.floor
  local key, cap, period, cost = KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[6]
  local ncost, server = tonumber(cost), ARGV[1] == '0'
  local allowed, remaining, retry, reset, total
  if server and ncost <= cap and period % 1000 == 0 then
    local count, until_end
    do -- fw_count(key, cap, period, cost, ncost, now) -> count, reset, from fixed_window.lua
      local now = nil
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
    if count then
      do -- window_decide(count, stop, now, cap, cost) -> allowed, remaining, retry, reset, total, from fixed_window.lua
        local count, stop, now, cost = count - ncost, until_end, 0, ncost
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
    end
  elseif not server or period % 1000 ~= 0 then
    local now
    if not server then now = tonumber(ARGV[1]) end
    do -- fw_hash_check(key, cap, period, cost, now, server) -> allowed, remaining, retry, reset, from fixed_window.lua
      local cost = ncost
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
  end
  if allowed then
    -- the reply of one.lua's fast paths (a denial while the key's
    -- pending marker exists is 2: a refund may still undo it)
    if allowed == 0 and KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then allowed = 2 end
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
local check, alg = fixed_window, '1'
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
