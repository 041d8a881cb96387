--- @include "pod_args"

-- The pod's residency key of medium `m`, built once per call instead of once per block.
local res_keys = {}
local function res_key(m)
  local key = res_keys[m]
  if not key then
    key = RES .. m
    res_keys[m] = key
  end
  return key
end
