--- @include "has_refcounts"
--- @include "pod_media"
--- @include "res_key"
--- @include "rank_of"
--- @include "call_time"

-- One holder of (pod, std, x) went away. With none left the pod no longer holds std in x:
-- the residency goes, and when x was the value's medium the next best held one takes over,
-- with the time of its own last store; with no medium left the pod's field goes. `fresh`, when
-- given, is a medium the caller stored std in at `now`. Returns nil while other holders
-- remain, 1 when the pod's matrix field went, 0 otherwise.
local function release(std, x, fresh)
  if has_refcounts() then
    local field = std .. '|' .. x
    local holders = call('HGET', RC, field)
    if holders == '2' then
      call('HDEL', RC, field)
      return nil
    elseif holders then
      call('HINCRBY', RC, field, -1)
      return nil
    end
  end
  call('ZREM', res_key(x), std)
  shrunk[x] = true
  local best, ts
  for y in pairs(pod_media()) do
    if y ~= x then
      local score = y == fresh and now or call('ZSCORE', res_key(y), std)
      if score and (not best or better(y, best)) then
        best, ts = y, score
      end
    end
  end
  local key = MATRIX .. std
  if not best then
    return call('HDEL', key, pod)
  end
  -- Other media remain: the value changes only if it named x, which it surely did when x
  -- is the top medium. (Looking at the other media first saves this read when none remain,
  -- as for a block evicted from CPU after leaving GPU.)
  if rank_of(x) ~= 0 or not top_listed then
    local current = call('HGET', key, pod)
    if current and medium_of(current) ~= x then
      return 0
    end
  end
  call('HSET', key, pod, ts == now and now_value(best) or value(seconds(ts), best))
  return 0
end
