--[[
Retire a stream's engine blocks (a stream purge): they keep their references until drained.

Input:
  KEYS[1..6]  refcounts, pod media, pod ranks, retired generations, pod models, pod kinds
  ARGV        the pod arguments (includes/pod_args.lua), then
    stream name
Output:
  retired generations of the pod (drain them)
  Error "LEGACY_LAYOUT ..." while the pod keeps engine blocks as before issue 35 (nothing
  written).
]]
--- @include "retire"

local refused = refuse_legacy()
if refused then
  return refused
end
local rank = ARGV[p]
if call('SISMEMBER', RANKS, rank) == 1 then
  retire(rank)
  call('SREM', RANKS, rank)
end
return call('HLEN', RETIRED)
