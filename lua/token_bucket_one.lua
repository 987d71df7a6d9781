-- Token bucket, one check, the common case written flat: a key that holds
-- no state, or state written under the same limit ("<r>/<tau>") at or
-- before now. token_bucket_fast makes
-- token_bucket's decision on key with ARGV[b..b+4] (capacity, period, r,
-- u, cost) at now (on the server's clock when server is true) with its
-- arithmetic, inline, and returns allowed,
-- remaining, retry_after, reset_after as one.lua replies them; in any
-- other case it returns nothing and writes nothing, and the general code
-- decides (it defines no function, and is defined before them). intf
-- (fast.lua) formats integers. Each fast function parses the numbers at
-- one position b once per script: a batch's calls of the same limit share
-- one position (batch.lua), and parsing costs.
local tb_b, tb_cap, tb_r, tb_u, tb_cost, tb_rtau
local function token_bucket_fast(key, b, now, server)
  local v = redis.call('HMGET', key, 'm', 'r', 'ts')
  local m, ts = tonumber(v[1]), tonumber(v[3])
  if b ~= tb_b then
    tb_b, tb_cap, tb_r, tb_u, tb_cost = b, tonumber(ARGV[b]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4])
    -- the r field of this limit: its refill and full window
    tb_rtau = ARGV[b + 2] .. '/' .. string.format(intf, math.floor((tb_cap * tb_u + tb_r - 1) / tb_r))
  end
  local cap, r, u, cost = tb_cap, tb_r, tb_u, tb_cost
  local full = cap * u
  local diff
  if not ts then
    diff = 0
  elseif m and v[2] == tb_rtau and now >= ts then
    diff = 0
    if (now - ts) * r < m then diff = m - (now - ts) * r end
    if diff > full then diff = nil end
  end
  if diff then
    local floor = math.floor
    local remaining = floor((full - diff) / u)
    if cost > cap then return 0, remaining, 0, floor((diff + r - 1) / r) end
    local nxt = diff + cost * u
    if nxt > full then
      return 0, remaining, floor((nxt - full + r - 1) / r), floor((diff + r - 1) / r)
    end
    -- token_bucket_write(key, nxt, r, now, reset)
    local reset = floor((nxt + r - 1) / r)
    if ts then -- it holds this r already (see above)
      redis.call('HSET', key, 'm', string.format(intf, nxt), 'ts', string.format(intf, now))
    else
      redis.call('HSET', key, 'm', string.format(intf, nxt), 'r', tb_rtau, 'ts', string.format(intf, now))
    end
    -- bucket_ttl (prelude.lua): rounded up to the ms, and on a clock not
    -- the server's its expiry_margin, 1000 ms, more
    local ttl = floor((reset + 999) / 1000)
    if not server then ttl = ttl + 1000 end
    redis.call('PEXPIRE', key, string.format(intf, ttl))
    remaining = floor((full - nxt) / u)
    if remaining < 0 then remaining = 0 end
    return 1, remaining, 0, reset
  end
end
