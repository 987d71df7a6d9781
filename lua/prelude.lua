-- redlimit: one script evaluates every check of one request, all-or-nothing.
--
-- KEYS[i]            the storage key of check i
-- ARGV[1]            now in µs; 0 means the Redis server clock (TIME)
-- ARGV[2+6(i-1)...]  per check: algorithm, capacity, period µs, r, u, cost
--                    (r, u: refill r scaled units per µs, one unit = u scaled
--                    units; token_bucket and gcra only)
--
-- Reply: for each check, four integers: allowed (0/1), remaining,
-- retry_after µs, reset_after µs.
--
-- Phase 1 evaluates every check without writing. Only if all pass does
-- phase 2 evaluate them again, writing state and a TTL equal to reset_after
-- (rounded up to ms): a key that expires is indistinguishable from a key at
-- full capacity.
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
