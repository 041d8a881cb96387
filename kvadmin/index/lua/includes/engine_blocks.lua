--- @include "pod_args"

-- The stream holds engine block `eh` (= std) in the media of `media_text` (see parse).
local function write(eb, eh, std, media_text)
  call('HSET', eb, eh, std .. '|' .. media_text)
end

-- The engine-blocks hashes of the pod's live streams (data-parallel ranks), read once per call.
local stream_ebs
-- What a live stream of the pod other than the one of `eb` holds as engine block `eh` (its
-- engine-blocks value), nil when none does. A pod with one rank pays nothing, a DP-n pod at
-- most n - 1 HGETs. It resolves another rank's placeholders (engine hash -> content is a
-- function of the engine), and it is the mapping key's reference count by rank, read from
-- the streams' own engine blocks rather than kept in a counter that could drift.
local function held_elsewhere(eh, eb)
  if not stream_ebs then
    stream_ebs = {}
    for _, name in ipairs(call('SMEMBERS', RANKS)) do
      stream_ebs[#stream_ebs + 1] = EB .. name
    end
  end
  for _, other in ipairs(stream_ebs) do
    if other ~= eb then
      local v = call('HGET', other, eh)
      if v then
        return v
      end
    end
  end
  return nil
end

-- Whether dropping a block deletes its mapping key: under the setting (pod_args.lua); garbage
-- collection sets it to remove the keys left from when the setting was on.
local forget_mappings = mapping_keys

-- kthena's mapping key of `eh` is per pod: it goes when the last stream holding `eh` lets it go.
local function forget_mapping(eh, eb)
  if not held_elsewhere(eh, eb) then
    call('DEL', MAPPING .. eh)
  end
end

-- The stream no longer holds engine block `eh`: the entry goes, and its mapping key unless
-- another rank still holds the block.
local function drop(eb, eh)
  call('HDEL', eb, eh)
  if forget_mappings then
    forget_mapping(eh, eb)
  end
end

-- The stream still holds engine block `eh` (= std) in the media of `list`; with none left
-- it drops the block. The caller releases the media that left the list.
local function keep(eb, eh, std, list)
  if #list == 0 then
    drop(eb, eh)
  else
    write(eb, eh, std, table.concat(list, ','))
  end
end
