--- @include "pod_args"

-- The engine-blocks value "{std}|{media list}" and its media lists.
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

-- An engine-blocks value "{std}|{media list}": std, media list text.
local function parse(v)
  local sep = find(v, '|', 1, true)
  return sub(v, 1, sep - 1), sub(v, sep + 1)
end

local function has(text, m)
  return find(',' .. text .. ',', ',' .. m .. ',', 1, true) ~= nil
end
