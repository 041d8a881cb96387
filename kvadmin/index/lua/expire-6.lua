--[[
Garbage collection (gc.py), one step over a stream's engine blocks: ownership whose last
store is older than a cutoff goes, exactly as if the engine had sent the removals, so refcounts,
residency, engine blocks, mapping keys and the matrix value's best medium stay consistent.
Mapping keys go whatever the setting: those left from when it was on are collected too. An
engine block kept as builds before the short values wrote it ("{std}|GPU", "{std}|CPU") is
rewritten in its short form (includes/media_list.lua's entry): a run over an index written
before them upgrades every live value, as writes upgrade those they touch.

Input:
  KEYS[1..6]  refcounts, pod media, pod ranks, retired generations, pod models, pod kinds
  ARGV        the pod arguments (includes/pod_args.lua), then
    stream name, the bucket to start at ("0" at first), cutoff (residency score), about how
    many engine blocks to look at
Output:
  { the bucket to go on at ("0" at the end), residency entries removed, matrix fields removed,
    engine blocks looked at, values rewritten in their short form }
  Error "LEGACY_LAYOUT ..." while the pod keeps engine blocks as before issue 35 (nothing
  written).
]]
--- @include "media_list"
--- @include "res_key"
--- @include "engine_blocks"
--- @include "release"
--- @include "pod_media"

-- Collection removes the mapping keys of what it drops, also with the setting off.
forget_mappings = true

local refused = refuse_legacy()
if refused then
  return refused
end
-- One step over a stream's engine blocks, whole buckets of its live generation until about
-- `count` entries were looked at: a medium goes when the pod's residency of the block there is
-- older than the cutoff (the last store of the block in that medium by any rank is that old,
-- so every holder of it is). Progress is the next bucket, "0" at the end. Blocks stored since
-- the cutoff are newer, so the step is safe to interleave.
local rank, bucket, cutoff, count =
  ARGV[p], tonumber(ARGV[p + 1]), tonumber(ARGV[p + 2]), tonumber(ARGV[p + 3])
own_prefix = live_prefix(rank)
local owned, fields, scanned, compacted = 0, 0, 0, 0
while bucket < BUCKETS and scanned < count do
  local name = bucket_name(bucket)
  local eb = own_prefix .. name
  local flat = call('HGETALL', eb)
  for i = 1, #flat, 2 do
    local f, v = flat[i], flat[i + 1]
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
      keep(eb, f, engine_hash(f, name), std, kept)
      for _, x in ipairs(gone) do
        local went = release(std, x)
        if went then
          owned = owned + 1
          fields = fields + went
        end
      end
    elseif v ~= entry(std, media_text) then
      write(eb, f, std, media_text)
      compacted = compacted + 1
    end
  end
  scanned = scanned + #flat / 2
  bucket = bucket + 1
end
settle_media()
if bucket >= BUCKETS then
  bucket = 0
end
return { tostring(bucket), owned, fields, scanned, compacted }
