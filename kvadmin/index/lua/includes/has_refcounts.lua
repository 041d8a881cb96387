--- @include "pod_args"

-- Whether the pod's refcounts hash exists, looked up once per script call: most pods hold
-- no block twice, and then a release looks nothing up.
local refcounts
local function has_refcounts()
  if refcounts == nil then
    refcounts = call('EXISTS', RC) == 1
  end
  return refcounts
end
