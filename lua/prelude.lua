-- redlimit: one script evaluates every check of one request, all-or-nothing.
--
-- KEYS[i]            the storage key of check i
-- ARGV[1]            now in µs; 0 means the Redis server clock (TIME)
-- ARGV[2]            mode: 0 decide, 1 refund
-- ARGV[3+6(i-1)...]  per check: algorithm, capacity, period µs, r, u, cost
--                    (r, u: refill r scaled units per µs, one unit = u scaled
--                    units; token_bucket and gcra only)
-- ARGV[3+6n+(i-1)]   refund mode only: the reset_after µs that the commit
--                    of check i replied (n = #KEYS)
--
-- Reply: for each check, four integers: allowed (0/1), remaining,
-- retry_after µs, reset_after µs; then one more: the now used, in µs.
--
-- Decide: phase 1 evaluates every check without writing. Only if all pass
-- does phase 2 evaluate them again, writing state and a TTL equal to
-- reset_after (rounded up to ms): a key that expires is indistinguishable
-- from a key at full capacity. If any check denies, nothing is written and
-- the passing checks report their state as it is.
--
-- Refund: gives back what a decide call that allowed all its checks
-- consumed, then reports every check's state as it is at that now (allowed 1,
-- retry_after 0). ARGV[1] must be the now that decide call replied. Redis
-- Cluster needs it: the checks of one request whose keys live in different
-- hash slots run as one decide call per slot, and when one slot denies, the
-- slots that committed are refunded (see algorithms.Redis).
--
-- Numbers are float64: every integer here stays below 2^53 (the Go side
-- validates limits so that it does), and every number sent back to Redis is
-- formatted with %.0f so no exponent notation reaches a key.

local floor = math.floor

local function fmt(n)
  return string.format('%.0f', n)
end

-- ceil(a / b) for integers a >= 0, b > 0 (exact below 2^53).
local function ceil_div(a, b)
  return floor((a + b - 1) / b)
end

local function pexpire(key, us)
  redis.call('PEXPIRE', key, fmt(ceil_div(us, 1000)))
end
