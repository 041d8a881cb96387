--[[
Drop the pod's queued batches up to a seq (they are applied).

Input:
  KEYS[1]     the pod's push queue
  ARGV[1]     the last seq applied
Output:
  nothing
]]
while true do
  local head = redis.call('LINDEX', KEYS[1], 0)
  if not head or tonumber(string.match(head, '^%d+')) > tonumber(ARGV[1]) then
    return
  end
  redis.call('LPOP', KEYS[1])
end
