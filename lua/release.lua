-- Release: frees the slots of concurrency leases before they expire.
-- Joined after prelude.lua, concurrency.lua and now.lua.
--
-- KEYS[i]        the storage key of lease i (on a sharded client, the
--                keys of one call live in one hash slot)
-- ARGV[1]        now in µs; 0 means the Redis server clock (TIME)
-- ARGV[2i,2i+1]  lease i's id and cost (slots)
--
-- Reply: for each lease, how many of its slots were held and are now
-- free (0: released already, or expired), then the now used, in µs.
-- Releasing twice frees nothing the second time.
local reply = {}
for i = 1, #KEYS do
  reply[i] = concurrency_remove(KEYS[i], tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1]), now)
end
reply[#KEYS + 1] = now
return reply
