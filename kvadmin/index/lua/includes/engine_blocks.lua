--- @include "pod_args"

-- The stream holds engine block `eh` (= std) in the media of `media_text` (see parse).
local function write(eb, eh, std, media_text)
  call('HSET', eb, eh, std .. '|' .. media_text)
end

-- The engine-blocks hashes of the pod's live streams (data-parallel ranks), read once per call.
local stream_ebs
-- Whether a live stream of the pod other than the one of `eb` holds engine block `eh`. This is
-- the mapping key's reference count by rank, read from the streams' own engine blocks rather
-- than kept in a counter: a pod with one rank pays nothing, a DP-n pod at most n - 1 HEXISTS
-- per dropped block, and the count cannot drift from what the streams hold.
local function held_elsewhere(eh, eb)
  if not stream_ebs then
    stream_ebs = {}
    for _, name in ipairs(call('SMEMBERS', RANKS)) do
      stream_ebs[#stream_ebs + 1] = EB .. name
    end
  end
  for _, other in ipairs(stream_ebs) do
    if other ~= eb and call('HEXISTS', other, eh) == 1 then
      return true
    end
  end
  return false
end

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
  forget_mapping(eh, eb)
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
