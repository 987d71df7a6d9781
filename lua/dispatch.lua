-- Dispatch: decide (two phases over all checks) or refund, one reply.
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local n = #KEYS

-- mode: 'check' evaluates, 'commit' evaluates and writes, 'peek' reads the
-- state without consuming (a cost that can never fit takes no branch that
-- writes, and reports the remaining and reset as they are).
local function eval(i, mode)
  local o = 3 + (i - 1) * 6
  local alg, cap, period = tonumber(ARGV[o]), tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  local r, u, cost = tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5])
  local commit = mode == 'commit'
  if mode == 'peek' then cost = cap + 1 end
  local key = KEYS[i]
  if alg == 1 then return fixed_window(key, cap, period, cost, now, commit) end
  if alg == 2 then return sliding_log(key, cap, period, cost, now, commit) end
  if alg == 3 then return sliding_window(key, cap, period, cost, now, commit) end
  if alg == 4 then return token_bucket(key, cap, r, u, cost, now, commit) end
  if alg == 5 then return gcra(key, cap, r, u, cost, now, commit) end
  return redis.error_reply('redlimit: unknown algorithm ' .. tostring(alg))
end

-- refund gives back what a commit of check i at now took; reset is the
-- reset_after that commit replied.
local function refund(i, reset)
  local o = 3 + (i - 1) * 6
  local alg, cap, period = tonumber(ARGV[o]), tonumber(ARGV[o + 1]), tonumber(ARGV[o + 2])
  local r, u, cost = tonumber(ARGV[o + 3]), tonumber(ARGV[o + 4]), tonumber(ARGV[o + 5])
  local key = KEYS[i]
  if alg == 1 then return fixed_window_refund(key, period, cost, now, reset) end
  if alg == 2 then return sliding_log_refund(key, period, cost, now, reset) end
  if alg == 3 then return sliding_window_refund(key, period, cost, now, reset) end
  if alg == 4 then return token_bucket_refund(key, cap, r, u, cost, now) end
  if alg == 5 then return gcra_refund(key, cap, r, u, cost, now) end
  return redis.error_reply('redlimit: unknown algorithm ' .. tostring(alg))
end

local reply = {}
if ARGV[2] == '1' then
  for i = 1, n do
    local err = refund(i, tonumber(ARGV[2 + 6 * n + i]))
    if type(err) == 'table' then return err end
  end
  for i = 1, n do
    local _, remaining, _, reset = eval(i, 'peek')
    if remaining < 0 then remaining = 0 end
    local o = (i - 1) * 4
    reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4] = 1, remaining, 0, reset
  end
  reply[4 * n + 1] = now
  return reply
end

-- One check (the common case): evaluate once, committing. A check writes
-- only when it is allowed, so this is the two phases in one pass.
if n == 1 then
  local allowed, remaining, retry, reset = eval(1, 'commit')
  if type(allowed) == 'table' then return allowed end
  if remaining < 0 then remaining = 0 end
  return {allowed, remaining, retry, reset, now}
end

local all = true
for i = 1, n do
  local allowed, remaining, retry, reset = eval(i, 'check')
  if type(allowed) == 'table' then return allowed end
  if allowed == 0 then all = false end
  local o = (i - 1) * 4
  reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4] = allowed, remaining, retry, reset
end
for i = 1, n do
  local o = (i - 1) * 4
  if all then
    eval(i, 'commit')
  elseif reply[o + 1] == 1 then
    -- nothing is consumed: a passing check reports its state as it is
    local _, remaining, _, reset = eval(i, 'peek')
    reply[o + 2], reply[o + 4] = remaining, reset
  end
  if reply[o + 2] < 0 then reply[o + 2] = 0 end
end
reply[4 * n + 1] = now
return reply
