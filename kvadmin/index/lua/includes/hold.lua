--- @include "media_list"
--- @include "engine_blocks"
--- @include "refresh"
--- @include "add_holder"

-- The stream holds the engine block of field `f` of bucket key `eb` (= std) in `m`.
-- `media_text` is its current media list, nil for a new entry. Stores with tokens put their medium first (the primary tier, which a
-- removal without a medium means); placeholders append theirs.
local function hold(eb, f, std, media_text, m, primary)
  if media_text then
    if has(media_text, m) then
      refresh(std, m)
      return
    end
    if primary then
      media_text = m .. ',' .. media_text
    else
      media_text = media_text .. ',' .. m
    end
  else
    media_text = m
  end
  write(eb, f, std, media_text)
  add_holder(std, m)
end
