--- @include "media_list"
--- @include "release"
--- @include "engine_blocks"

-- Release the engine blocks `flat` (field, value, ...) of a retired bucket (its name; nil for
-- a hash of the layout before issue 35, whose fields are engine hashes) and their mapping keys
-- unless a live stream still holds them; returns their fields.
local function release_entries(flat, bucket)
  local fields = {}
  for i = 1, #flat, 2 do
    local f = flat[i]
    local std, media_text = parse(flat[i + 1])
    for _, x in ipairs(split(media_text)) do
      release(std, x)
    end
    if forget_mappings then
      forget_mapping(bucket and engine_hash(f, bucket) or f)
    end
    fields[#fields + 1] = f
  end
  return fields
end
