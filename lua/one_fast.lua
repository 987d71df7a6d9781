-- The fast path of a one-check script whose algorithm's fast path is a
-- function (the script's recipe names it, fast): it decides the common
-- case, and a call whose part of a call spanning slots (KEYS[3]) must set
-- markers goes to the general code. See one.lua for KEYS, ARGV and the
-- reply, which here leaves out the now: the Go side needs it only from a
-- call with a commit marker.
local fast = ${fast}
if not KEYS[3] then
  local allowed, remaining, retry, reset = fast(KEYS[1], 2, now, ARGV[1] == '0')
  if allowed then
    if allowed ~= 1 and KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then allowed = 2 end
    if remaining < 0 then remaining = 0 end
    return {allowed, remaining, retry, reset}
  end
end
