-- The fixed window's one-check script starts here: a check on the
-- server's clock with a period of whole ms, not a part of a call spanning
-- slots (KEYS[3]), and whose cost can fit, is decided flat, before any
-- function is defined, by fixed_window_count.lua (the commands
-- ulule/limiter's counter needs: INCRBY then PTTL), which follows, and
-- replied by fixed_window_flat_end.lua, which closes this block. What
-- fixed_window_count.lua leaves goes on to fixed_window_fast, then the
-- general code. See one.lua for KEYS, ARGV and the reply, which leaves out
-- the now, as one_fast.lua's.
if ARGV[1] == '0' and not KEYS[3] then
  local key, cap, period, cost = KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[6]
  local ncost = tonumber(cost)
  if ncost <= cap and period % 1000 == 0 then
    local count, reset
