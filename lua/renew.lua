-- Renew: extends the concurrency leases still held (concurrency_renew,
-- concurrency.lua). Joined after prelude.lua, concurrency.lua and now.lua.
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
  reply[i] = concurrency_renew(KEYS[i], tonumber(ARGV[3 * i - 1]), tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1]), now)
end
reply[#KEYS + 1] = now
return reply
