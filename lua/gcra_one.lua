-- GCRA's one-check script starts here: a check with no marker keys is
-- decided flat by gcra_flat.lua, which follows (the Go side closes this
-- block after it), before any function is defined; what it leaves falls
-- through to the general script after it (the functions of the prelude
-- and gcra.lua are defined only then: each definition costs on every
-- call that reaches it). now.lua has read now, fast.lua defined intf.
if not KEYS[2] then
  local floor = math.floor
  local key, cap, r, u, cost = KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  local up = 999 -- see gcra_flat.lua
  if ARGV[1] ~= '0' then up = 1000999 end
  -- the value ends with this limit's full window: "<tat>/<tau>"
  local sfx = '/' .. string.format(intf, floor((cap * u + r - 1) / r))
