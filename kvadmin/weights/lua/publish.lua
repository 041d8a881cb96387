--[[
Announce a weights version to every process, unless Redis already has it or a newer one.

Input:
  KEYS[1]     the active version, KEYS[2] the active configuration (JSON)
  ARGV        the version, its configuration JSON, "1" to publish even an older version
              (the repair after restoring an older database)
Output:
  1 when published, 0 when not
]]
local current = tonumber(redis.call('GET', KEYS[1]) or '-1')
if tonumber(ARGV[1]) <= current and ARGV[3] ~= '1' then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 1
