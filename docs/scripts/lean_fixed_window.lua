-- lean_fixed_window.lua: generated from the sources in lua/ by
-- go test ./lua -run TestScriptFiles -update; do not edit.
--
-- Decides one fixed_window check on the server's clock with no marker
-- keys, a period of whole ms and a cost within the capacity, as one_fixed_window
-- decides it, sent with only the numbers its flat path reads.
--
-- KEYS:
--   KEYS[1]  the storage key
-- ARGV:
--   ARGV[1]  capacity
--   ARGV[2]  period µs (whole ms)
--   ARGV[3]  cost, when it is not 1
-- Reply:
--   {count, reset_after µs}: the key's count with the cost added (allowed
--   if and only if it is at most the capacity; a denial took the cost back);
--   empty, nothing written, for a state one_fixed_window decides
--
-- SHA1 ceaed3f71bfcf86e05e754a65a9e0c8c9f19e6ee (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from these sections of lua/, in order (<file>.<section>, or a
-- whole <file>), their formulas inlined where they say --@ inline:
--   fixed_window.lean
-- ---- the script, as sent ----
-- The fixed window's lean script: one check on the server's clock, no
-- marker keys and a cost no larger than the capacity (the Go side sends
-- it only then), decided as the one-check script decides it, with only
-- the numbers that needs: every ARGV a script is sent costs Redis about as
-- much as a command (parsing it, a Lua string, a slot of ARGV), and the
-- one-check script's other four (now, r, u and, most often, a cost of 1)
-- go unread there.
--
-- KEYS[1]   the storage key (see fixed_window.lua)
-- ARGV[1]   capacity
-- ARGV[2]   period in µs
-- ARGV[3]   the cost, when it is not 1 or ARGV[4] is sent
-- ARGV[4]   'h' for a period of no whole ms (the key is a hash), which
--           the script so tells without parsing the period (a string's
--           arithmetic costs Redis a strtod on every call)
--
-- Reply, for a period of whole ms (fw_count): {count, reset_after µs},
-- count being the key's count with this check's cost added, and the check
-- allowed if and only if it is at most the capacity (a denial took its
-- units back: a denied check consumes nothing); the Go side makes the
-- Result from it, the capacity and the cost (calc.CountOutcome). For a
-- period of no whole ms (a hash: fw_hash_check): allowed (0 or 1),
-- remaining, retry_after µs, reset_after µs, as one.lua's fast paths
-- reply. An empty reply leaves the check, undecided and with nothing
-- written, to the algorithm's one-check script (a key of the other
-- layout: an older layout, a calendar quota's window, a client clock's
-- write; a string with no TTL that was there before).
local key, cap, period, cost, ncost = KEYS[1], ARGV[1], ARGV[2], '1', 1
if ARGV[3] then cost, ncost = ARGV[3], tonumber(ARGV[3]) end
if not ARGV[4] then
  local count, reset
  do -- fw_count(key, cap, period, cost, ncost, now) -> count, reset, from fixed_window.lua
    local now = nil
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
  end
  if count then return {count, reset} end
  return {}
end
local floor = math.floor
local allowed, remaining, retry, reset
do -- fw_hash_check(key, cap, period, cost, now, server) -> allowed, remaining, retry, reset, from fixed_window.lua
  local cap, period, cost, now, server = tonumber(cap), tonumber(period), ncost, nil, true
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
if allowed then return {allowed, remaining, retry, reset} end
return {}
