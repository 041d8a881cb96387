--[[
Garbage collection (gc.py): release up to N residency entries of one medium older than a cutoff
that no engine block holds any more (normally none after `expire` went over every rank).

Input:
  KEYS[1..6]  refcounts, pod media, pod ranks, retired generations, pod models, pod kinds
  ARGV        the pod arguments (includes/pod_args.lua), then
    medium, cutoff (residency score), N
Output:
  { progress: 1 while more may be left, 0 when done, -1 while retired engine blocks must be
    drained first; residency entries removed, matrix fields removed, 0 }
  Error "LEGACY_LAYOUT ..." while the pod keeps engine blocks as before issue 35 (nothing
  written).
]]
--- @include "res_key"
--- @include "release"
--- @include "pod_media"
--- @include "engine_blocks"

-- Residency older than the cutoff that survived `expire` has no holder left (a holder
-- would have been released there): release it as its last holder. Retired engine blocks
-- still hold references until drained, so nothing happens while any are left (progress
-- -1: drain first). Progress is 1 while more may be left.
local refused = refuse_legacy()
if refused then
  return refused
end
if call('HLEN', RETIRED) > 0 then
  return { -1, 0, 0, 0 }
end
local m, cutoff, count = ARGV[p], ARGV[p + 1], tonumber(ARGV[p + 2])
local stds = call('ZRANGEBYSCORE', res_key(m), '-inf', '(' .. cutoff, 'LIMIT', 0, count)
local fields = 0
for _, std in ipairs(stds) do
  call('HDEL', RC, std .. '|' .. m)
  fields = fields + release(std, m)
end
settle_media()
local more = 0
if #stds == count then
  more = 1
end
return { more, #stds, fields, 0 }
