-- Concurrency limits: their state and its code; algorithms/internal/calc/
-- concurrency.go is the Go twin. The renewal of leases (renew.lua) is a
-- section of its own, which only the renew script holds.

--@ section functions
-- Concurrency: the slots of a key in flight, a sorted set with one member
-- per slot, "<lease>:<n>" (n from 0 to cost-1 within its lease), scored
-- with the instant (µs) its lease expires. A slot counts while its expiry
-- is after now; every check first removes the expired ones, so the set
-- holds at most cap members plus those that expired since the last touch.
-- r is the check's lease id (the Go side sends Check.Lease there; this
-- algorithm has no refill). Slots leave by release.lua or by expiring;
-- renew.lua extends them.
-- concurrency_write adds the cost slots of lease, expiring at expiry, and
-- sets the key's TTL to ttl µs (until its last slot expires).
local function concurrency_write(key, lease, cost, expiry, ttl)
  zadd_units(key, fmt(expiry), fmt(lease), 0, cost)
  pexpire(key, ttl)
end

local function concurrency(key, cap, period, lease, _, cost, now, commit)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
  local count = redis.call('ZCARD', key)
  local reset, last = 0, 0
  if count > 0 then
    last = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    reset = last - now
  end
  if cost > cap then return 0, cap - count, 0, reset end
  local l = fmt(lease)
  if redis.call('ZSCORE', key, l .. ':0') then
    -- the lease acquires again (a call retried after its reply was lost):
    -- its own slots are not taken from others, and are taken again
    local i = 0
    while i < cost do
      if redis.call('ZSCORE', key, l .. ':' .. fmt(i)) then count = count - 1 end
      i = i + 1
    end
  end
  if count + cost > cap then
    -- the (count+cost-cap)-th earliest lease to expire frees enough slots
    local e = redis.call('ZRANGE', key, count + cost - cap - 1, count + cost - cap - 1, 'WITHSCORES')
    return 0, cap - count, tonumber(e[2]) - now, reset
  end
  local expiry = now + period
  if reset < period then reset = period end
  if commit then concurrency_write(key, lease, cost, expiry, reset) end
  return 1, cap - count - cost, 0, reset, lease, cost, expiry, reset
end

-- concurrency_remove drops the expired slots of key and slots 0 to cost-1
-- of lease, then sets the key's TTL to its last slot's expiry (an empty
-- sorted set is deleted by Redis). It returns how many slots of the lease
-- it removed.
local function concurrency_remove(key, lease, cost, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
  local l = fmt(lease)
  local args = {}
  local removed = 0
  local i = 0
  while i < cost do
    args[#args + 1] = l .. ':' .. fmt(i)
    i = i + 1
    if #args == 200 or i == cost then
      removed = removed + redis.call('ZREM', key, unpack(args))
      args = {}
    end
  end
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then pexpire(key, tonumber(last[2]) - now) end
  return removed
end

-- Refund (Cluster compensation): the slots a commit took go, as a release
-- would free them.
local function concurrency_refund(key, _, _, lease, _, cost, now, _)
  concurrency_remove(key, lease, cost, now)
end
--@ end

--@ section renew
-- concurrency_renew extends the slots 0 to cost-1 of lease on key to
-- expire at now + period, or later if they did already, when the lease
-- still holds its first slot once the expired slots are dropped; then
-- sets the key's TTL to its last slot's expiry. It returns 1 if the lease
-- was held, else 0 (released, or expired: its slots may have gone to
-- others, and are not brought back).
local function concurrency_renew(key, lease, cost, period, now)
  local l = fmt(lease)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
  local held = 0
  if redis.call('ZSCORE', key, l .. ':0') then
    held = 1
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
  return held
end
--@ end
