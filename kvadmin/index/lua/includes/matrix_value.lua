--- @include "pod_args"

-- A matrix value "{ts}|{medium}" ("{ts}" without a medium) and its parts.
local function value(ts, m)
  if m == '' then
    return ts
  end
  return ts .. '|' .. m
end

-- Whole seconds of a residency score (integer microseconds) for a matrix value.
local function seconds(score)
  local digits = #score - 6
  if digits < 1 then
    return '0'
  end
  return sub(score, 1, digits)
end

local function medium_of(v)
  local sep = find(v, '|', 1, true)
  if sep then
    return sub(v, sep + 1)
  end
  return ''
end
