-- The now of a one-check script, in µs: ARGV[1], or the server clock (TIME)
-- when it is 0. It starts every one-check script (see one.lua).
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
