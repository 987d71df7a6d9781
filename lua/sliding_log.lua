-- Sliding log: sorted set, one member per unit, score = µs. An entry at s
-- counts while s > now - period. Members are "<score>:<n>" where n counts the
-- members already at that score: entries leave by score range, so all
-- members of one score leave together and n never repeats. New entries are
-- stamped max(now, newest) so a clock that goes back cannot expire them early.
-- sliding_log_write adds cost entries stamped stamp and drops those that
-- left the window at now.
local function sliding_log_write(key, stamp, cost, period, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now - period))
  local s = fmt(stamp)
  zadd_units(key, s, s, redis.call('ZCOUNT', key, s, s), cost)
  pexpire(key, stamp + period - now)
end

local function sliding_log(key, cap, period, _, _, cost, now, commit)
  local from = '(' .. fmt(now - period)
  local count = redis.call('ZCOUNT', key, from, '+inf')
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local newest = tonumber(last[2])
  local reset = 0
  if count > 0 then reset = newest + period - now end
  if cost > cap then return 0, cap - count, 0, reset end
  if count + cost > cap then
    -- the (count+cost-cap)-th oldest entry in the window must leave it
    local k = count + cost - cap
    local e = redis.call('ZRANGEBYSCORE', key, from, '+inf', 'WITHSCORES', 'LIMIT', k - 1, 1)
    -- the entries count until reset under this limit: the TTL follows, or
    -- after a change to a longer period the TTL the last commit set would
    -- drop them before the retry_after replied
    pexpire(key, reset)
    return 0, cap - count, tonumber(e[2]) + period - now, reset
  end
  local stamp = now
  if newest and newest > stamp then stamp = newest end
  if commit then sliding_log_write(key, stamp, cost, period, now) end
  return 1, cap - count - cost, 0, stamp + period - now, stamp, cost, period, now
end

-- Refund: remove cost members of the stamp the commit at at used, named
-- by its reply reset = stamp + period - at, while they count at now.
-- Members of one stamp are all alike and numbered <stamp>:0..n-1; the
-- newest cost numbers go, so the rest stay contiguous and the next commit's
-- numbers (starting at the count) stay unique. The key then lives while
-- its newest entry counts.
local function sliding_log_refund(key, _, period, _, _, cost, at, reset, now)
  local stamp = at + reset - period
  if stamp <= now - period then return end
  local s = fmt(stamp)
  local n = redis.call('ZCOUNT', key, s, s)
  local stop = n - cost
  if stop < 0 then stop = 0 end
  local args = {}
  local i = n - 1
  while i >= stop do
    args[#args + 1] = s .. ':' .. fmt(i)
    i = i - 1
    if #args == 200 or i < stop then
      redis.call('ZREM', key, unpack(args))
      args = {}
    end
  end
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if last[2] then pexpire(key, tonumber(last[2]) + period - now) end
end
