--[[
Release up to N retired engine blocks of the pod; the pod's bookkeeping goes with its last entry.

Input:
  KEYS[1..6]  refcounts, pod media, pod ranks, retired generations, pod models, pod kinds
  ARGV        the pod arguments (includes/pod_args.lua), then
    N
Output:
  retired generations left
  Error "LEGACY_LAYOUT ..." while the pod keeps engine blocks as before issue 35 (nothing
  written).
]]
--- @include "release_entries"
--- @include "pod_media"
--- @include "forget_empty_pod"

local refused = refuse_legacy()
if refused then
  return refused
end
-- A retired generation is drained bucket by bucket; the retired hash keeps the next bucket,
-- so a step starts where the one before it stopped.
local budget = tonumber(ARGV[p])
local retired = call('HGETALL', RETIRED)
for i = 1, #retired, 2 do
  local member, bucket = retired[i], tonumber(retired[i + 1])
  local prefix = EB .. member .. ':'
  while bucket < BUCKETS and budget > 0 do
    local name = bucket_name(bucket)
    local key = prefix .. name
    local fields = release_entries(call('HRANDFIELD', key, budget, 'WITHVALUES'), name)
    if #fields > 0 then
      call('HDEL', key, unpack(fields))
    end
    if #fields < budget then
      bucket = bucket + 1 -- fewer than asked: the bucket is empty now
    end
    budget = budget - #fields
  end
  if bucket < BUCKETS then
    call('HSET', RETIRED, member, bucket)
    break
  end
  call('HDEL', RETIRED, member)
end
settle_media()
forget_empty_pod()
return call('HLEN', RETIRED)
