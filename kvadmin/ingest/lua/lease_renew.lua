--[[
Renew the leases this worker still holds: another may own one by now.

Input:
  KEYS        the lease keys of the streams the worker reads
  ARGV[1]     the worker id, ARGV[2] the lease time in ms
Output:
  the positions (1-based, in KEYS) of the leases it no longer holds
]]
local lost = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
  else
    lost[#lost + 1] = i
  end
end
return lost
