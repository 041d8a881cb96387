--[[
How many pods hold each block, in one call: thousands of HLENs in a pipeline cost more to pack
and parse than Redis takes to answer them.

Input:
  KEYS        block keys
Output:
  the number of owners of each, in KEYS order
]]
local n = {}
for i, key in ipairs(KEYS) do
  n[i] = redis.call('HLEN', key)
end
return n
