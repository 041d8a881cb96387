--[[
Delete up to N of a pod's entries, every rank, with no reference counting.

Input:
  KEYS[1..6]  refcounts, pod media, pod ranks, retired generations, pod models, pod kinds
  ARGV        the pod arguments (includes/pod_args.lua), then
    N
Output:
  { 1 while more is left else 0, matrix fields removed }
  Stops at once ({0, 0}) when the pod is no longer the one we set out to purge (another purger
  finished and new entries arrived since). Error "LEGACY_LAYOUT ..." while the pod keeps
  engine blocks as before issue 35 (nothing written).
]]
--- @include "engine_blocks"

local refused = refuse_legacy()
if refused then
  return refused
end
-- Stop when the pod is no longer the one we set out to purge (another purger finished and
-- new entries arrived since): returns {more, matrix fields removed}.
if (call('HGET', PODS, pod) or '') ~= model then
  return { 0, 0 }
end
local budget = tonumber(ARGV[p])
local removed = 0
-- Empty a generation's buckets from `bucket` on; returns the first bucket not yet empty
-- (BUCKETS when all are), having spent the budget on the way.
local function pop(prefix, bucket)
  while bucket < BUCKETS and budget > 0 do
    local name = bucket_name(bucket)
    local key = prefix .. name
    local fields = call('HRANDFIELD', key, budget)
    if #fields > 0 then
      local mapping = {}
      for i, f in ipairs(fields) do
        mapping[i] = MAPPING .. engine_hash(f, name)
      end
      call('DEL', unpack(mapping))
      call('HDEL', key, unpack(fields))
    end
    if #fields < budget then
      bucket = bucket + 1
    end
    budget = budget - #fields
  end
  return bucket
end
for _, name in ipairs(call('SMEMBERS', RANKS)) do
  if pop(live_prefix(name), 0) < BUCKETS then
    return { 1, removed }
  end
  call('SREM', RANKS, name)
end
local retired = call('HGETALL', RETIRED)
for i = 1, #retired, 2 do
  local member = retired[i]
  local bucket = pop(EB .. member .. ':', tonumber(retired[i + 1]))
  if bucket < BUCKETS then
    call('HSET', RETIRED, member, bucket)
    return { 1, removed }
  end
  call('HDEL', RETIRED, member)
end
for _, m in ipairs(call('SMEMBERS', MEDIA)) do
  local key = RES .. m
  local stds = call('ZRANGE', key, 0, budget - 1)
  for _, std in ipairs(stds) do
    removed = removed + call('HDEL', MATRIX .. std, pod)
  end
  if #stds > 0 then
    call('ZREMRANGEBYRANK', key, 0, #stds - 1)
  end
  budget = budget - #stds
  if call('EXISTS', key) == 1 then
    return { 1, removed }
  end
  call('SREM', MEDIA, m)
  if budget <= 0 then
    return { 1, removed }
  end
end
call('UNLINK', RC)
call('DEL', MEDIA, RANKS, RETIRED)
call('HDEL', PODS, pod)
call('HDEL', KINDS, pod)
return { 0, removed }
