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
