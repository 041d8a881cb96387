--- @include "res_key"
--- @include "set_value"

-- The pod holds `std` in `m` (again): refresh the residency score and, unless the caller
-- settles it `later`, the matrix value. Returns true when the pod did not hold `std` in `m`.
local function refresh(std, m, later)
  local added = call('ZADD', res_key(m), now, std) == 1
  if not later then
    set_value(std, m)
  end
  return added
end
