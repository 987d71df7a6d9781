-- Block: takes a quota block of a token bucket or GCRA key, k units its
-- caller may use from now until now + hold, never later (a rule with
-- quota blocks, see docs/leasing.md). It follows the prelude, the
-- functions of gcra.lua and token_bucket.lua, and now.lua.
--
-- KEYS[1]     the storage key
-- ARGV[1]     now in µs; 0 means the Redis server clock (TIME)
-- ARGV[2..6]  capacity, period µs, r, u, k (as one check of one.lua)
-- ARGV[7]     the algorithm (4 token_bucket, 5 gcra)
-- ARGV[8]     hold, µs
--
-- The block is checked at now, as a check of k units is, and stored as if
-- its units arrived at now + hold, the last instant they may be used: the
-- key's time-debt becomes max(debt, hold*r) + k*u. Every later check then
-- counts the block's units as late as they may come, and each unit used is
-- one the bucket had: over any interval, what is admitted (the block's
-- units included) stays within burst + rate * interval. The debt may
-- exceed a full bucket by up to hold; the key then waits for it, as one
-- whose clock went back (bucket_debt, under the same limit). Its units are
-- never given back (see docs/leasing.md). The arithmetic is gcra.lua's
-- bucket_block.
--
-- Reply: allowed (0/1), remaining (after the block), retry_after µs,
-- reset_after µs, now µs. calc's State.Block is its Go twin.
local server = ARGV[1] == '0'
local cap, r, u, k = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local tb = ARGV[7] == '4'
local check = gcra
if tb then check = token_bucket end
local allowed, remaining, retry, reset, nxt = check(KEYS[1], cap, 0, r, u, k, now, false, server)
if remaining < 0 then remaining = 0 end
if allowed ~= 1 then return {0, remaining, retry, reset, now} end
--@ inline local bucket_block(nxt, tonumber(ARGV[8]), cap, u, r, k) -> held, left, until_full
--@ inline local bucket_tau(cap, u, r) -> tau
if tb then
  token_bucket_write(KEYS[1], held, r, now, until_full, tau, server)
else
  gcra_write(KEYS[1], held, r, now, tau, server)
end
if left < 0 then left = 0 end
return {1, left, 0, until_full, now}
