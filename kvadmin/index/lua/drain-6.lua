--[[
Release up to N retired engine blocks of the pod; the pod's bookkeeping goes with its last entry.

Input:
  KEYS[1..6]  refcounts, pod media, pod ranks, retired set, pod models, pod kinds
  ARGV        the pod arguments (includes/pod_args.lua), then
    N
Output:
  retired generations left
]]
--- @include "media_list"
--- @include "release"
--- @include "engine_blocks"
--- @include "pod_media"

local budget = tonumber(ARGV[p])
for _, member in ipairs(call('SMEMBERS', RETIRED)) do
  local key = RETIRED_EB .. member
  local flat = call('HRANDFIELD', key, budget, 'WITHVALUES')
  local fields = {}
  for i = 1, #flat, 2 do
    local eh, v = flat[i], flat[i + 1]
    local std, media_text = parse(v)
    for _, x in ipairs(split(media_text)) do
      release(std, x)
    end
    if forget_mappings then
      forget_mapping(eh, nil)
    end
    fields[#fields + 1] = eh
  end
  if #fields > 0 then
    call('HDEL', key, unpack(fields))
  end
  if call('EXISTS', key) == 0 then
    call('SREM', RETIRED, member)
  end
  budget = budget - #fields
  if budget <= 0 then
    break
  end
end
settle_media()
local left = call('SCARD', RETIRED)
if left == 0 and call('SCARD', RANKS) == 0 and call('EXISTS', MEDIA) == 0 then
  call('HDEL', PODS, pod)
  call('HDEL', KINDS, pod)
  call('DEL', MEDIA)
end
return left
