--[[
Move up to N of a pod's engine blocks from the layout of builds before issue 35 (one hash per
stream, `kvadmin:eh:{pod}|{stream}`; retired ones in `kvadmin:eh-retired:...`) to today's
buckets (includes/engine_blocks.lua). Every other command refuses the pod until nothing is left
in the old layout, so nothing else writes its engine blocks meanwhile.

1. Each live stream's entries move to the buckets of its live generation, their values in
   today's form (includes/media_list.lua's entry).
2. Then the retired ones are released, as drain-6.lua releases retired generations: with every
   live stream moved, a mapping key goes only when no live stream holds its engine hash.

Input:
  KEYS[1..6]  refcounts, pod media, pod ranks, retired generations, pod models, pod kinds
  ARGV        the pod arguments (includes/pod_args.lua), then
    N
Output:
  1 while more is left in the old layout, 0 when none is
]]
--- @include "release_entries"
--- @include "pod_media"
--- @include "forget_empty_pod"

local budget = tonumber(ARGV[p])
for _, name in ipairs(call('SMEMBERS', RANKS)) do
  local old = LEGACY_EB .. name
  local prefix = live_prefix(name)
  local flat = call('HRANDFIELD', old, budget, 'WITHVALUES')
  local fields = {}
  for i = 1, #flat, 2 do
    local eh = flat[i]
    local bucket, f = slot(eh)
    call('HSET', prefix .. bucket, f, entry(parse(flat[i + 1])))
    fields[#fields + 1] = eh
  end
  if #fields > 0 then
    call('HDEL', old, unpack(fields))
  end
  if #fields >= budget then
    return 1
  end
  budget = budget - #fields
end
for _, member in ipairs(call('SMEMBERS', LEGACY_RETIRED)) do
  local key = LEGACY_RETIRED_EB .. member
  local fields = release_entries(call('HRANDFIELD', key, budget, 'WITHVALUES'))
  if #fields > 0 then
    call('HDEL', key, unpack(fields))
  end
  if #fields >= budget then
    settle_media()
    return 1
  end
  call('SREM', LEGACY_RETIRED, member)
  budget = budget - #fields
end
settle_media()
forget_empty_pod()
return 0
