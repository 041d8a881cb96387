--- @include "pod_args"

local medium_ranks = {}
local function rank_of(m)
  local r = medium_ranks[m]
  if r == nil then
    r = pref[match(lower(m), '^%s*(.-)%s*$')] or fallback
    medium_ranks[m] = r
  end
  return r
end

local function better(a, b)
  local ra, rb = rank_of(a), rank_of(b)
  if ra ~= rb then
    return ra < rb
  end
  return a < b
end
