-- redlimit's scripts: each is this prelude, one or all of the algorithm
-- files, then an entry point. one.lua decides one check (the common case)
-- with the script of that check's algorithm; dispatch.lua decides several
-- checks all-or-nothing, or refunds, with the script holding all five;
-- batch.lua decides several queued calls, one after another.
--
-- Every algorithm file defines three functions; the first and the last
-- take the same parameters, of which each uses what it needs:
--
--   <name>(key, cap, period, r, u, cost, now, commit)
--     evaluates a check of cost units at now (µs), and returns four
--     integers: allowed (0/1), remaining, retry_after µs, reset_after µs.
--     When the check passes it also returns the arguments after key of
--     <name>_write, and calls it itself if commit is true.
--   <name>_write(key, ...)
--     writes the state a passing check left, with its TTL. The dispatch
--     calls it once every check of a request has passed, without reading
--     the keys again.
--   <name>_refund(key, cap, period, r, u, cost, at, reset, now)
--     gives back cost units that a commit at at, which replied
--     reset_after = reset, took, as they stand at now: right after the
--     commit (now nil, meaning at: Redis Cluster compensation, see
--     dispatch.lua) or later (charge after the response, refund.lua).
--
-- cap is the capacity in units, period the window or refill period in µs;
-- token_bucket and gcra refill r scaled units per µs, one unit being u
-- scaled units, so every refill is an exact integer.
--
-- A key's state expires when it would read as a full bucket: its TTL is
-- reset_after rounded up to the ms, so a key that expires is
-- indistinguishable from a key at full capacity.
--
-- Numbers are float64: every integer here stays below 2^53 (the Go side
-- validates limits so that it does), and every number sent back to Redis is
-- formatted with %.0f so no exponent notation reaches a key.

local floor = math.floor

-- server_clock is true while the check being decided has its now from the
-- server's clock (TIME), which is also the clock of TTLs. The entry points
-- that decide checks set it (one.lua, dispatch.lua, batch.lua).
local server_clock = false

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

-- refund_debt is the time-debt, in 1/r µs, that a late refund of a
-- bucket's units gives back at now: their own, cost_debt, but no more than
-- what is left at now of the debt of the commit at at, which replied reset
-- µs to full (units the bucket refilled since are not given back again:
-- that would create capacity). calc's refundDebt is its Go twin.
local function refund_debt(cost_debt, at, reset, now, r)
  return math.max(0, math.min(cost_debt, (at + reset - now) * r))
end

-- zadd_units adds cost members to the sorted set key, each scored score
-- (a string) and named "<prefix>:<n>" for n from first: a sliding log's
-- entries, a concurrency lease's slots. A ZADD takes 100 at a time, so that
-- a large cost never passes Lua's limit on unpack.
local function zadd_units(key, score, prefix, first, cost)
  local args = {}
  local i = 0
  while i < cost do
    args[#args + 1] = score
    args[#args + 1] = prefix .. ':' .. fmt(first + i)
    i = i + 1
    if #args == 200 or i == cost then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
end

-- bucket_debt returns the time-debt at now, in 1/r µs, of a token bucket or
-- GCRA key that is full at the instant a + b/rs µs (b < rs), and whether it
-- was cut to full (cap*u). A fraction counted in another refill (rs ~= r) is
-- rounded up to the next whole µs. same says that the key was written under
-- a limit of the same full window (tau, ceil(full/r) µs, which every bucket
-- key stores): then the debt is never cut, since more than a full bucket
-- means that the clock went back, and the key waits for it to catch up (a
-- clock going back never creates capacity). Under another limit a debt
-- above full is cut to full, and the caller stores the cut. See bucketDebt
-- in algorithms/internal/calc/gcra.go.
local function bucket_debt(a, b, rs, now, r, full, same)
  if b ~= 0 and rs ~= r then a, b = a + 1, 0 end
  if a < now then return 0, false end
  local d = a - now
  if same then return d * r + b, false end
  if d > floor(full / r) then return full, true end
  local diff = d * r + b
  if diff > full then return full, true end
  return diff, false
end
