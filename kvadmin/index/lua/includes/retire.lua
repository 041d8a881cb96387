--- @include "pod_args"

-- Move a stream's engine blocks aside in O(1); they keep their references until drained.
local function retire(rank)
  local eb = EB .. rank
  if call('EXISTS', eb) == 0 then
    return
  end
  local member, key
  repeat
    member = rank .. '|' .. call('HINCRBY', STATUS .. rank, 'generation', 1)
    key = RETIRED_EB .. member
  until call('EXISTS', key) == 0
  call('RENAME', eb, key)
  call('SADD', RETIRED, member)
end
