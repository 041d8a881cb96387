--- @include "rank_of"
--- @include "call_time"

-- The pod stored `std` in `m` now: the matrix value names the best medium the pod holds, with
-- this time. Only a medium below the top one (the first listed, unless unlisted media rank
-- first) reads the current value to know whether a better medium is held.
local function set_value(std, m)
  local key, best, current = MATRIX .. std, m, nil
  if rank_of(m) ~= 0 or not top_listed then
    current = call('HGET', key, pod)
    if current then
      local held = medium_of(current)
      if better(held, m) then
        best = held
      end
    end
  end
  local v = now_value(best)
  if v ~= current then
    call('HSET', key, pod, v)
  end
end
