-- Renew: extends the concurrency leases still held. Joined after
-- prelude.lua, concurrency.lua and now.lua.
--
-- KEYS[i]            the storage key of lease i (on a sharded client, the
--                    keys of one call live in one hash slot)
-- ARGV[1]            now in µs; 0 means the Redis server clock (TIME)
-- ARGV[3i-1..3i+1]   lease i's id, cost (slots) and period (µs)
--
-- Reply: for each lease, 1 if it was held (its slots now expire at
-- now+period, or later if they did already), 0 if it was not (released,
-- or expired: its slots may have gone to others, and are not brought
-- back); then the now used, in µs.
local reply = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local l, cost, period = fmt(tonumber(ARGV[3 * i - 1])), tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
  reply[i] = 0
  if redis.call('ZSCORE', key, l .. ':0') then
    reply[i] = 1
    local expiry = now + period
    local j = 0
    while j < cost do
      local m = l .. ':' .. fmt(j)
      local s = redis.call('ZSCORE', key, m)
      if s and tonumber(s) < expiry then redis.call('ZADD', key, 'XX', fmt(expiry), m) end
      j = j + 1
    end
  end
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then pexpire(key, tonumber(last[2]) - now) end
end
reply[#KEYS + 1] = now
return reply
