--- @include "pod_args"

-- An engine-blocks value and its media lists (kvadmin/index/engine_blocks.py reads them the
-- same way). A block held in GPU alone is "{std}", in CPU alone "-{std}": Redis keeps both as
-- 8-byte integers in a listpack, 15 bytes less than the text (vLLM's two media: on its CPU
-- offload half a stream's entries are in CPU alone). Any other media are "{std}|{media list}",
-- as builds before them wrote every value; both forms are read.
-- A media list is never empty: "" is the one medium "" (no medium), "GPU," is GPU and "".
local function split(text)
  local out, start = {}, 1
  while true do
    local comma = find(text, ',', start, true)
    if not comma then
      out[#out + 1] = sub(text, start)
      return out
    end
    out[#out + 1] = sub(text, start, comma - 1)
    start = comma + 1
  end
end

local function index_of(list, m)
  for i, y in ipairs(list) do
    if y == m then
      return i
    end
  end
end

-- The entry of a media list that a removal in `m` takes: `m` itself; a removal without a
-- medium takes the medium-less entry, or else the primary tier (writer.py, decision 2).
local function removal_at(list, m)
  return index_of(list, m) or (m == '' and 1 or nil)
end

-- Whether a removal in `m` takes the one medium of `media_text`, the common case, decided
-- without building the list (a table is costly here: it is garbage right away).
local function only(media_text, m)
  return (media_text == m or m == '') and not find(media_text, ',', 1, true)
end

-- An engine-blocks value: std, media list text.
local function parse(v)
  local sep = find(v, '|', 1, true)
  if sep then
    return sub(v, 1, sep - 1), sub(v, sep + 1)
  end
  if byte(v, 1) == 45 then -- '-'
    return sub(v, 2), 'CPU'
  end
  return v, 'GPU'
end

-- The engine-blocks value of std held in the media of `media_text`.
local function entry(std, media_text)
  if media_text == 'GPU' then
    return std
  elseif media_text == 'CPU' then
    return '-' .. std
  end
  return std .. '|' .. media_text
end

local function has(text, m)
  return find(',' .. text .. ',', ',' .. m .. ',', 1, true) ~= nil
end
