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
local checks, writes, fasts, gcra_call = ${checks}, ${writes}, ${fasts}, ${gcra_call}

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
