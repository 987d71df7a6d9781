-- Token bucket: its state, and the code that reads and writes it. Its
-- arithmetic is GCRA's (gcra.lua: bucket_debt, bucket_decide, ...), read
-- from another state. algorithms/internal/calc/token_bucket.go is the Go
-- twin.

--@ section functions
-- Token bucket (token_bucket.lua): hash {m = tokens missing from a full
-- bucket, as the time they take to refill in 1/r µs; r = "<r>/<tau>", the
-- refill of the limit that wrote m and that limit's full window tau =
-- ceil(cap*u/r) µs; ts = the instant m was counted at, µs}. One token is u
-- units; the bucket refills r units per µs, exactly. The bucket is full at
-- ts + m/r µs, the instant GCRA stores as its TAT, read by the same
-- bucket_debt: under the limit that wrote it the debt is never cut (more
-- than a full bucket means the clock went back: the key waits for it);
-- across a change of limit it is kept, cut to one full bucket of the new
-- limit, and the two algorithms make the same decisions. A denied check
-- writes nothing (but a cut debt), so no accrued refill is ever lost.
-- State written before tau was stored (r a bare number) is read as written
-- under another limit; state written before m was stored, {t = tokens in
-- scaled units, ts}, is read under the current limit.

-- token_bucket_write stores a debt of m scaled units at now, full in reset
-- µs, under a limit of full window tau.
local function token_bucket_write(key, m, r, now, reset, tau, server)
  redis.call('HSET', key, 'm', fmt(m), 'r', fmt(r) .. '/' .. fmt(tau), 'ts', fmt(now))
  --@ inline local bucket_ttl(reset, server) -> ttl
  redis.call('PEXPIRE', key, fmt(ttl))
end

-- tb_load returns the key's time-debt at now in 1/r µs (0 for no state, or
-- a full bucket) and whether the key holds state; it stores a cut debt.
local function tb_load(key, full, r, now, tau, server)
  local v = redis.call('HMGET', key, 'm', 'r', 'ts')
  local m, ts = tonumber(v[1]), tonumber(v[3])
  if not ts then return 0, false end
  local rs, tw
  if v[2] then
    local s = string.find(v[2], '/', 1, true)
    if s then
      rs, tw = tonumber(string.sub(v[2], 1, s - 1)), tonumber(string.sub(v[2], s + 1))
    else
      rs = tonumber(v[2])
    end
  end
  if not (m and rs) then
    local t = tonumber(redis.call('HGET', key, 't'))
    if not t then return 0, false end
    if t > full then t = full end
    m, rs = full - t, r
  end
  local diff, cut = bucket_debt(ts + floor(m / rs), m % rs, rs, now, r, full, tw == tau)
  if cut then token_bucket_write(key, diff, r, now, ceil_div(diff, r), tau, server) end
  return diff, true
end

local function token_bucket(key, cap, _, r, u, cost, now, commit, server)
  --@ inline local bucket_tau(cap, u, r) -> tau
  local diff = tb_load(key, cap * u, r, now, tau, server)
  --@ inline local bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt
  if allowed == 1 and commit then token_bucket_write(key, nxt, r, now, reset, tau, server) end
  return allowed, remaining, retry, reset, nxt, r, now, reset, tau, server
end

-- Refund: put back the cost tokens a commit took (no more than
-- bucket_give gives back, from the commit's horizon less what refunds
-- gave back since it: see refund_since), clamped to the capacity,
-- evaluated at now, so no refill is counted twice.
local function token_bucket_refund(key, cap, _, r, u, cost, at, reset, now, mark, server)
  --@ inline local bucket_tau(cap, u, r) -> tau
  local diff, exists = tb_load(key, cap * u, r, now, tau, server)
  if not exists then return end
  local since, rec = refund_since(key, mark, at, reset)
  --@ inline local bucket_give(cost, u, at, reset - since, now, r) -> give
  refund_add(rec, ceil_div(give, r), now, tau)
  diff = diff - give
  if diff <= 0 then
    redis.call('DEL', key)
    return
  end
  token_bucket_write(key, diff, r, now, ceil_div(diff, r), tau, server)
end
--@ end

--@ section fast
-- Token bucket, one check, the common case written flat: a key that holds
-- no state, or state written under the same limit ("<r>/<tau>").
-- token_bucket_fast makes token_bucket's decision on key with
-- ARGV[b..b+4] (capacity, period, r, u, cost) at now (on the server's
-- clock when server is true) with its arithmetic, inline, and returns
-- allowed, remaining, retry_after, reset_after as one.lua replies them;
-- in any other case it returns nothing and writes nothing, and the
-- general code decides (it defines no function, and is defined before
-- them). intf (fast.lua) formats integers. Each fast function parses the
-- numbers at one position b once per script: a batch's calls of the same
-- limit share one position (batch.lua), and parsing costs.
local tb_b, tb_cap, tb_r, tb_u, tb_cost, tb_rtau
local function token_bucket_fast(key, b, now, server)
  local floor = math.floor
  local v = redis.call('HMGET', key, 'm', 'r', 'ts')
  local m, ts = tonumber(v[1]), tonumber(v[3])
  if b ~= tb_b then
    tb_b, tb_cap, tb_r, tb_u, tb_cost = b, tonumber(ARGV[b]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
    --@ inline local bucket_tau(tb_cap, tb_u, tb_r) -> tau
    -- the r field of this limit: its refill and full window
    tb_rtau = ARGV[b + 2] .. '/' .. string.format(intf, tau)
  end
  local cap, r, u, cost = tb_cap, tb_r, tb_u, tb_cost
  local diff
  if not ts then
    diff = 0
  elseif m and v[2] == tb_rtau then
    -- full at ts + m/r µs
    --@ inline bucket_same_debt(ts + floor(m / r), m % r, now, r) -> diff
  end
  if diff then
    --@ inline local bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt
    if remaining < 0 then remaining = 0 end
    if allowed == 1 then
      -- token_bucket_write(key, nxt, r, now, reset, tau, server)
      if ts then -- it holds this r already (see above)
        redis.call('HSET', key, 'm', string.format(intf, nxt), 'ts', string.format(intf, now))
      else
        redis.call('HSET', key, 'm', string.format(intf, nxt), 'r', tb_rtau, 'ts', string.format(intf, now))
      end
      --@ inline local bucket_ttl(reset, server) -> ttl
      redis.call('PEXPIRE', key, string.format(intf, ttl))
    end
    return allowed, remaining, retry, reset
  end
end
--@ end
