--- @include "pod_args"

local media
local shrunk = {} -- media whose residency lost entries in this call
local function pod_media()
  if not media then
    media = {}
    for _, m in ipairs(call('SMEMBERS', MEDIA)) do
      media[m] = true
    end
  end
  return media
end

-- A medium stays in the pod's media set while its residency has entries; checked once per
-- script call rather than once per removal.
local function settle_media()
  for m in pairs(shrunk) do
    if call('EXISTS', RES .. m) == 0 then
      call('SREM', MEDIA, m)
      if media then
        media[m] = nil
      end
    end
  end
  shrunk = {}
end
