--- @include "matrix_value"

-- This call's time: the residency score of its stores (unix microseconds) and its whole
-- seconds, the matrix values' ts.
local now, now_seconds

-- The matrix value of each medium at this time, built once per call instead of once per block.
local now_values = {}
local function now_value(m)
  local v = now_values[m]
  if not v then
    v = value(now_seconds, m)
    now_values[m] = v
  end
  return v
end
