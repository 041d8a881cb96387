--- @include "pod_args"

-- The pod's bookkeeping goes with its last entry: no stream, no retired generation, no
-- residency left.
local function forget_empty_pod()
  if call('HLEN', RETIRED) == 0 and call('SCARD', RANKS) == 0 and call('EXISTS', MEDIA) == 0 then
    call('HDEL', PODS, pod)
    call('HDEL', KINDS, pod)
    call('DEL', MEDIA)
  end
end
