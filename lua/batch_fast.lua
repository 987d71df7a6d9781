-- One-check calls at the head of a batch of one algorithm whose fast path
-- is a function (fixed_window, sliding_window, token_bucket), the common
-- case, decided flat before the prelude and the algorithm are defined
-- (each function a script defines costs on every call of it): it follows
-- batch_state.lua, fast.lua (intf) and the algorithm's fast function (its
-- section fast), which the recipe names, fast, with its number as ARGV
-- sends it, fast_alg; the rest of the batch script follows it.
--
-- While the next call is one check of that algorithm (n = 1 with that
-- number, or n = 0: the numbers of the last call, decided here) on one
-- server or a sharded client (modes 0 and 2), it is decided by the fast
-- function exactly as batch.lua's one() decides it through `fasts`: the
-- same function on the same ARGV and now, the pending marker's EXISTS
-- when a sharded call is denied, remaining clamped at 0. The first call
-- that is not such a call, that the fast function does not decide (it
-- returns nothing, having written nothing), or whose key's command fails
-- (a key of another type: the fast function raises before it writes,
-- pcall catches it) is left, undecided, to batch.lua's loop, which goes on
-- from k, a, o and last as its own loop leaves them; so is every call
-- after it. These algorithms write their state as they decide, so there is
-- nothing to flush: when every call is decided the reply is returned at
-- once. batch_state.lua declares the state (t, reply, k, a, o, last).
local fast, fast_alg = ${fast}, '${id}'
do
  local na = #ARGV
  while a <= na do
    -- n is 0 when the call's numbers are the last call's, at ARGV[last]
    local same = ARGV[a] == '0'
    if not same and (ARGV[a] ~= '1' or ARGV[a + 3] ~= fast_alg) then break end
    local mode = ARGV[a + 2]
    if mode ~= '0' and mode ~= '2' then break end
    local now = call_now(ARGV[a + 1])
    -- c: where the call's check's numbers are in ARGV (batch.lua's c)
    local c = last
    if not same then c = a + 3 end
    local ok, allowed, remaining, retry, reset = pcall(fast, KEYS[k], c + 1, now, ARGV[a + 1] == '0')
    if not ok or not allowed then break end
    if allowed ~= 1 and mode == '2' and redis.call('EXISTS', KEYS[k + 1]) == 1 then allowed = 2 end
    if remaining < 0 then remaining = 0 end
    reply[o + 1], reply[o + 2], reply[o + 3], reply[o + 4] = allowed, remaining, retry, reset
    o = o + 4
    if same then
      a = a + 3
    else
      last, a = c, a + 9
    end
    if mode == '0' then k = k + 1 else k = k + 2 end
  end
end
-- Every call decided, before anything else is defined.
if a > #ARGV then return reply end
