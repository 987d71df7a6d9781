    -- fixed_window_count.lua decided: the reply of one.lua's fast paths
    -- (a denial while the key's pending marker exists is 2: a refund may
    -- still undo it)
    if count then
      if count <= cap then return {1, cap - count, 0, reset} end
      local allowed = 0
      if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then allowed = 2 end
      local remaining = cap - count + ncost
      if remaining < 0 then remaining = 0 end
      return {allowed, remaining, reset, reset}
    end
  end
end
