--[[
Take a stream's lease when no one holds it. A lease this worker still holds is its own to take
again (after a failed round it let go of the stream without releasing it): no waiting for it
to lapse.

Input:
  KEYS[1]     the lease key
  ARGV[1]     the worker id, ARGV[2] the lease time in ms
Output:
  1 when the worker holds the lease now, 0 when another does
]]
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if owner then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
