--[[
Move a stream's engine blocks aside (a stream purge): they keep their references until drained.

Input:
  KEYS[1..6]  refcounts, pod media, pod ranks, retired set, pod models, pod kinds
  ARGV        the pod arguments (includes/pod_args.lua), then
    stream name
Output:
  retired generations of the pod (drain them)
]]
--- @include "retire"

local rank = ARGV[p]
retire(rank)
call('SREM', RANKS, rank)
return call('SCARD', RETIRED)
