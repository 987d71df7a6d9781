-- GCRA, one check, the common case written flat: no marker keys, and a
-- stored TAT that is absent or a whole µs written under this limit (its
-- full window, tau, is the value's suffix). It makes gcra's decision with gcra's arithmetic, inline, and
-- replies as one.lua does without the now (the Go side needs it only from
-- calls with marker keys; each value replied costs); any other case falls
-- through to the general
-- script after it (the functions of the prelude and gcra.lua are defined
-- only then: each definition costs on every call that reaches it).
-- now.lua has read now, fast.lua defined intf. gcra_lean.lua decides the
-- same checks alike on ARGV of its own, for r = 1 (TestLeanScripts holds
-- the two together).
if not KEYS[2] then
  local floor = math.floor
  local cap, r, u, cost = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  local full = cap * u
  -- the value ends with this limit's full window: "<tat>/<tau>"
  local sfx = '/' .. string.format(intf, floor((full + r - 1) / r))
  local v = redis.call('GET', KEYS[1])
  local a
  if v and string.sub(v, -#sfx) == sfx then a = tonumber(string.sub(v, 1, -#sfx - 1)) end
  if not v or a then
    local diff = 0
    if a and a >= now then diff = (a - now) * r end
    -- more than full: the clock went back; never cut under the same limit
    local remaining = floor((full - diff) / u)
    if remaining < 0 then remaining = 0 end
    if cost > cap then return {0, remaining, 0, floor((diff + r - 1) / r)} end
    local nxt = diff + cost * u
    if nxt > full then
      return {0, remaining, floor((nxt - full + r - 1) / r), floor((diff + r - 1) / r)}
    end
    -- gcra_write(KEYS[1], nxt, r, now, tau)
    local tat, b = string.format(intf, now + floor(nxt / r)), nxt % r
    if b ~= 0 then tat = tat .. ':' .. string.format(intf, b) .. ':' .. string.format(intf, r) end
    local reset = floor((nxt + r - 1) / r)
    redis.call('SET', KEYS[1], tat .. sfx, 'PX', string.format(intf, floor((reset + 999) / 1000)))
    remaining = floor((full - nxt) / u)
    if remaining < 0 then remaining = 0 end
    return {1, remaining, 0, reset}
  end
end
