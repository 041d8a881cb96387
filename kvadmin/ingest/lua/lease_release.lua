--[[
Release a lease this worker still holds: another may own it by now.

Input:
  KEYS[1]     the lease key
  ARGV[1]     the worker id
Output:
  1 when released, 0 when the worker no longer held it
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
