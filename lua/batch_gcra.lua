-- GCRA calls of one check at the head of a batch, the common case, decided
-- flat as gcra_one.lua decides one (batch.lua's gcra_call, without a
-- function call or a number parsed twice): while the next call is one
-- GCRA check on one server or a sharded client (modes 0 and 2) whose key
-- is absent or holds a whole-µs TAT written under its limit, and its
-- key's command does not fail. The first call that is not is left,
-- undecided, to batch.lua's loop, which goes on from k, a and o with the
-- same tats, dirty and order; so is every call after it. A limit's
-- numbers are parsed once while calls repeat it (ARGV strings compare by
-- identity in Lua), and not at all for a call that says it repeats them
-- (n = 0). batch_state.lua declares the state, fast.lua intf.
do
  local floor, format = math.floor, string.format
  local na = #ARGV
  local scap, sr, su, scost -- the strings of the numbers below
  local cap, r, u, cost, full, sfx
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
        full = cap * u
        sfx = '/' .. format(intf, floor((full + r - 1) / r))
      end
    end
    local key = KEYS[k]
    local v = tats[key]
    if v == nil then
      -- redis.pcall: an error (WRONGTYPE) is a table, left to batch.lua
      v = redis.pcall('GET', key)
    end
    -- a TAT written under this limit: "<tat>/<tau>" (gcra_one.lua)
    local tat
    if v then
      if type(v) ~= 'string' or string.sub(v, -#sfx) ~= sfx then break end
      tat = tonumber(string.sub(v, 1, -#sfx - 1))
      if not tat then break end
    end
    local now = call_now(ARGV[a + 1])
    if not same then last = a + 3 end
    local diff = 0
    if tat and tat >= now then diff = (tat - now) * r end
    tats[key] = v
    local allowed, remaining, retry, reset = 0, floor((full - diff) / u), 0, floor((diff + r - 1) / r)
    -- more than full: the clock went back (never cut under the same limit)
    if remaining < 0 then remaining = 0 end
    local nxt = diff + cost * u
    if cost <= cap and nxt > full then
      retry = floor((nxt - full + r - 1) / r)
    elseif cost <= cap then
      -- batch.lua's gcra_defer(key, nxt, r, reset, now)
      allowed, remaining, reset = 1, floor((full - nxt) / u), floor((nxt + r - 1) / r)
      local s, b = format(intf, now + floor(nxt / r)), nxt % r
      if b ~= 0 then s = s .. ':' .. format(intf, b) .. ':' .. format(intf, r) end
      s = s .. sfx
      tats[key] = s
      if not dirty[key] then order[#order + 1] = key end
      -- bucket_ttl (prelude.lua): on a clock not the server's, its
      -- expiry_margin, 1000 ms, more
      local up = 999
      if ARGV[a + 1] ~= '0' then up = 1000999 end
      dirty[key] = format(intf, floor((reset + up) / 1000))
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
