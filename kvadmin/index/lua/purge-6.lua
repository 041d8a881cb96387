--[[
Delete up to N of a pod's entries, every rank, with no reference counting.

Input:
  KEYS[1..6]  refcounts, pod media, pod ranks, retired set, pod models, pod kinds
  ARGV        the pod arguments (includes/pod_args.lua), then
    N
Output:
  { 1 while more is left else 0, matrix fields removed }
  Stops at once ({0, 0}) when the pod is no longer the one we set out to purge (another purger
  finished and new entries arrived since).
]]
--- @include "pod_args"

-- Stop when the pod is no longer the one we set out to purge (another purger finished and
-- new entries arrived since): returns {more, matrix fields removed}.
if (call('HGET', PODS, pod) or '') ~= model then
  return { 0, 0 }
end
local budget = tonumber(ARGV[p])
local removed = 0
local function pop(key)
  local fields = call('HRANDFIELD', key, budget)
  if #fields > 0 then
    local mapping = {}
    for i, eh in ipairs(fields) do
      mapping[i] = MAPPING .. eh
    end
    call('DEL', unpack(mapping))
    call('HDEL', key, unpack(fields))
    budget = budget - #fields
  end
  return call('EXISTS', key) == 0
end
-- Every engine-blocks hash a set names (live ranks, or retired generations); false when
-- the budget ran out first.
local function pop_all(set, prefix)
  for _, member in ipairs(call('SMEMBERS', set)) do
    if not pop(prefix .. member) then
      return false
    end
    call('SREM', set, member)
    if budget <= 0 then
      return false
    end
  end
  return true
end
if not (pop_all(RANKS, EB) and pop_all(RETIRED, RETIRED_EB)) then
  return { 1, removed }
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
