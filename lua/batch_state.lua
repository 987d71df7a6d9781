-- The state of a batch script (see batch.lua), declared before anything
-- else so that a flat loop (batch_gcra.lua, batch_fast.lua) can decide the
-- calls at the head of the batch before any function is defined, other
-- than call_now and flush below and the fast function batch_fast.lua
-- calls: t is the server's TIME once read, reply the reply, tats, dirty
-- and order the GCRA TATs read and not yet written (see batch.lua), k, a,
-- o where the next call's KEYS, ARGV and reply start, and last where the
-- numbers of the last call of one check start in ARGV (a call with n = 0
-- reuses them).
local t
local reply = {}
local tats, dirty, order = {}, {}, {}
local k, a, o, last = 1, 1, 0, 0

-- call_now returns the now of a call whose ARGV now is s: s as a number,
-- or for '0' the server's clock, read once per script (every call on the
-- server clock shares one TIME).
local function call_now(s)
  if s ~= '0' then return tonumber(s) end
  if not t then
    local tt = redis.call('TIME')
    t = tonumber(tt[1]) * 1000000 + tonumber(tt[2])
  end
  return t
end

-- flush writes the GCRA TATs of dirty, in order, and forgets every TAT
-- read (see batch.lua).
local function flush()
  for i = 1, #order do
    local key = order[i]
    redis.call('SET', key, tats[key], 'PX', dirty[key])
  end
  tats, dirty, order = {}, {}, {}
end
