--- @include "refresh"
--- @include "pod_media"
--- @include "has_refcounts"

-- One more holder of (pod, std, m). The first one is the residency entry alone; from the
-- second on, the refcount field counts them all.
local function add_holder(std, m, later)
  if refresh(std, m, later) then
    local held = pod_media()
    if not held[m] then
      call('SADD', MEDIA, m)
      held[m] = true
    end
  else
    local field = std .. '|' .. m
    if call('HINCRBY', RC, field, 1) == 1 then
      call('HSET', RC, field, 2)
    end
    refcounts = true
  end
end
