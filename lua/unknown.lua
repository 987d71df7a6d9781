-- unknown_algorithm, joined only into refund.lua's and cancel.lua's scripts
-- (every function a script defines costs on each of its calls), returns
-- the error reply for the first of n checks (stride numbers each in ARGV
-- from ARGV[3], the algorithm first) whose algorithm t has no function
-- for, or nil.
local function unknown_algorithm(t, n, stride)
  for i = 1, n do
    local a = ARGV[3 + stride * (i - 1)]
    if not t[tonumber(a)] then return redis.error_reply('redlimit: unknown algorithm ' .. tostring(a)) end
  end
end
