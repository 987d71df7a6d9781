-- lean_gcra.lua: generated from the sources in lua/ by
-- go test ./lua -run TestScriptFiles -update; do not edit.
--
-- Decides one gcra check on the server's clock with no marker keys, for a
-- limit whose emission interval is a whole number of µs, as one_gcra decides it,
-- sent with only the numbers its flat path reads.
--
-- KEYS:
--   KEYS[1]  the storage key
-- ARGV:
--   ARGV[1]  capacity (burst)
--   ARGV[2]  u: the emission interval in µs
--   ARGV[3]  the stored value's suffix, '/' .. capacity*u
--   ARGV[4]  cost, when it is not 1
-- Reply:
--   allowed (0 or 1), remaining, retry_after µs, reset_after µs;
--   empty, nothing written, for a value one_gcra decides
--
-- SHA1 49f884cd407afab79b6cbccf9da8ad494e9f30a6 (EVALSHA, SCRIPT EXISTS, SLOWLOG)
-- Built from these sections of lua/, in order (<file>.<section>, or a
-- whole <file>), their formulas inlined where they say --@ inline:
--   gcra.lean
-- ---- the script, as sent ----
-- GCRA's lean script: one check on the server's clock, no marker keys,
-- decided by gcra_check as the one-check script decides it, with only
-- the numbers it needs (see lean_fixed_window's header for why) and the
-- stored value's suffix computed once on the Go side rather than
-- formatted on every call.
--
-- KEYS[1]   the storage key (see gcra.lua)
-- ARGV[1]   capacity (the burst)
-- ARGV[2]   u, one unit in scaled units (see calc.Params)
-- ARGV[3]   the stored value's suffix: '/' .. tau, tau = ceil(capacity * u / r)
-- ARGV[4]   r, the refill in scaled units per µs, when it is not 1 (an
--           emission interval of no whole µs) or the cost is sent
-- ARGV[5]   the cost, when it is not 1
--
-- Reply: allowed (0 or 1), remaining, retry_after µs, reset_after µs, as
-- one.lua's fast paths reply; or an empty reply, having written nothing,
-- for a value gcra_check leaves to the general code (another limit's, or
-- not a TAT), which the algorithm's one-check script then decides.
--
-- The numbers, integers the Go side formats, are turned into numbers by
-- arithmetic rather than tonumber: a call of a library function costs
-- Redis about a thousand instructions.
local floor = math.floor
local sfx, rsfx, r, cost = ARGV[3], nil, 1, 1
if ARGV[4] then
  r = ARGV[4] + 0
  -- the suffix of a value with a fraction: ":<r>/<tau>"
  if r ~= 1 then rsfx = ':' .. ARGV[4] .. sfx end
  if ARGV[5] then cost = ARGV[5] + 0 end
end
local reply
do -- gcra_check(key, cap, r, u, cost, sfx, rsfx, server, now) -> reply, from gcra.lua
  local key, cap, u, server, now = KEYS[1], ARGV[1] + 0, ARGV[2] + 0, true, nil
  -- one check, the common case: a key that is absent or holds a value of
  -- this limit (gcra_parse) is decided here, from GET, TIME (only when now
  -- is nil, once the value is known to be decided here) and its SET, and
  -- replied as one.lua's fast paths reply ({allowed, remaining, retry_after,
  -- reset_after}, no now); reply is nil, nothing written, for any other
  -- value, which the general code decides
  local v = redis.call('GET', key)
  local a, b = nil, 0
  if v then
    do -- gcra_parse(v, sfx, rsfx) -> a, b, from gcra.lua
      -- a value written under this limit, whose full window's suffix is sfx
      -- ("/<tau>"), and whose TAT has no fraction ("<a>/<tau>") or one counted
      -- in this limit's r ("<a>:<b>:<r>/<tau>": rsfx is ":<r>/<tau>", nil when
      -- r is 1; it holds no magic character of a pattern): its TAT's whole µs a
      -- and fraction b; a is nil for any other value (another limit's, an older
      -- form, not a TAT), which only the general code (gcra_tat, bucket_debt)
      -- reads. Every call of a library function costs Redis about a thousand
      -- instructions: a value with a fraction is matched once, its digits
      -- turned into numbers by arithmetic (they are digits: no tonumber call).
      a, b = nil, 0
      local sa, sb
      if rsfx then sa, sb = string.match(v, '^(%d+):(%d+)' .. rsfx .. '$') end
      if sa then
        a, b = sa + 0, sb + 0
      elseif #v > #sfx and string.find(v, sfx, -#sfx, true) then
        a = tonumber(string.sub(v, 1, -#sfx - 1))
      end
    end
  end
  if not v or a then
    local t = now
    if not t then
      local tt = redis.call('TIME')
      t = tt[1] * 1000000 + tt[2]
    end
    local diff = 0
    if a then
      do -- bucket_same_debt(a, b, now, r) -> diff, from gcra.lua
        local now = t
        -- the time-debt at now, in 1/r µs, of a key that is full at the instant a
        -- + b/r µs, under the limit that wrote it: never cut (more than a full
        -- bucket means that the clock went back, and the key waits for it)
        diff = 0
        if a >= now then diff = (a - now) * r + b end
      end
    end
    local allowed, remaining, retry, reset, nxt
    do -- bucket_decide(diff, cap, u, r, cost) -> allowed, remaining, retry, reset, nxt, from gcra.lua
      -- a check of cost units against a bucket diff scaled units from full
      -- (calc's bucket): allowed (1/0), remaining (below 0 after the clock went
      -- back: callers clamp), retry_after and reset_after µs, and when allowed
      -- the debt it leaves, nxt
      local full = cap * u
      remaining, retry, nxt = floor((full - diff) / u), 0, diff + cost * u
      if cost <= cap and nxt <= full then
        allowed, remaining, reset = 1, floor((full - nxt) / u), floor((nxt + r - 1) / r)
      else
        allowed, reset = 0, floor((diff + r - 1) / r)
        -- a cost above the capacity never fits: retry 0
        if cost <= cap then retry = floor((nxt - full + r - 1) / r) end
      end
    end
    if remaining < 0 then remaining = 0 end
    if allowed == 1 then
      local value, f
      do -- gcra_value(nxt, r, now, sfx, rsfx) -> value, f, from gcra.lua
        local now = t
        -- the value of a TAT now + nxt/r µs under the limit whose suffixes are
        -- sfx ("/<tau>") and rsfx (":<r>/<tau>", unused when r is 1): "<a>" ..
        -- sfx, or "<a>:<b>" .. rsfx with a fraction b. Its integers are written
        -- with '%d' where the TAT's length proves it exact (a µs on the server's
        -- clock has 16 digits; see lua/doc.go), else with '%.0f': f says which,
        -- for the caller's other integers
        f = '%d'
        local at, frac = now + floor(nxt / r), nxt % r
        value = string.format(f, at)
        if #value < 12 then
          f = '%.0f'
          value = string.format(f, at)
        end
        if frac ~= 0 then
          value = value .. ':' .. string.format(f, frac) .. rsfx
        else
          value = value .. sfx
        end
      end
      local ttl
      do -- bucket_ttl(reset, server) -> ttl, from gcra.lua
        -- the TTL in ms of a bucket key full in reset µs: rounded up to the ms,
        -- and, written at a now that is not the server's clock, 1000 ms more
        -- (calc.ExpiryMargin). A TTL is relative: Redis turns it into an instant
        -- on its own clock when the key is written, and a replica, a failover
        -- and a failback keep that instant (Redis 7 replicates PXAT/PEXPIREAT).
        -- On the server's clock the state's instants (a TAT, a ts) are on that
        -- same clock, so whatever node holds the key, whatever its clock, the key
        -- expires exactly when its state reads full there. An injected now is not
        -- the clock that turns the TTL into an instant: a key written on a clock
        -- that runs ahead of the one that later reads it (a client clock stepping
        -- back, an instance whose clock is behind another's) expires that much
        -- before its state is full on the reader's clock, whose step back then
        -- creates capacity where the state would have made it wait; a step
        -- forward afterwards refills again. The margin keeps such a key until
        -- its state is full on any clock up to a second behind its writer's.
        -- (Redis before 7, whose replicas turn a replicated TTL into an instant
        -- on their own clock, and MIGRATE, which sends a relative TTL, do the
        -- same on the server's clock: a node whose clock is s behind lets such a
        -- key expire up to s early, at most s of refill, never more than the
        -- key's capacity.)
        ttl = floor((reset + 999) / 1000)
        if not server then ttl = ttl + 1000 end
      end
      redis.call('SET', key, value, 'PX', string.format(f, ttl))
    end
    reply = {allowed, remaining, retry, reset}
  end
end
if reply then return reply end
return {}
