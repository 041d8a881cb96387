--[[
Garbage collection (gc.py), one HSCAN step over a stream's engine blocks: ownership whose last
store is older than a cutoff goes, exactly as if the engine had sent the removals, so refcounts,
residency, engine blocks, mapping keys and the matrix value's best medium stay consistent.
Mapping keys go whatever the setting: those left from when it was on are collected too.

Input:
  KEYS[1..6]  refcounts, pod media, pod ranks, retired set, pod models, pod kinds
  ARGV        the pod arguments (includes/pod_args.lua), then
    stream name, HSCAN cursor, cutoff (residency score), HSCAN COUNT
Output:
  { next cursor ("0" at the end), residency entries removed, matrix fields removed, engine
    blocks looked at }
]]
--- @include "media_list"
--- @include "res_key"
--- @include "engine_blocks"
--- @include "release"
--- @include "pod_media"

-- Collection removes the mapping keys of what it drops, also with the setting off.
forget_mappings = true

-- One HSCAN step over a stream's engine blocks: a medium goes when the pod's residency of
-- the block there is older than the cutoff (the last store of the block in that medium by
-- any rank is that old, so every holder of it is). Progress is the next cursor, "0" at the
-- end. Blocks stored since the cutoff are newer, so the step is safe to interleave.
local rank, cursor, cutoff, count = ARGV[p], ARGV[p + 1], tonumber(ARGV[p + 2]), ARGV[p + 3]
local eb = EB .. rank
local scan = call('HSCAN', eb, cursor, 'COUNT', count)
local flat = scan[2]
local owned, fields = 0, 0
for i = 1, #flat, 2 do
  local eh, v = flat[i], flat[i + 1]
  local std, media_text = parse(v)
  local kept, gone = {}, {}
  for _, x in ipairs(split(media_text)) do
    local score = call('ZSCORE', res_key(x), std)
    if score and tonumber(score) >= cutoff then
      kept[#kept + 1] = x
    else
      gone[#gone + 1] = x
    end
  end
  if #gone > 0 then
    keep(eb, eh, std, kept)
    for _, x in ipairs(gone) do
      local went = release(std, x)
      if went then
        owned = owned + 1
        fields = fields + went
      end
    end
  end
end
settle_media()
return { scan[1], owned, fields, #flat / 2 }
