--[[
Keep one engine's counters as a sample for fitting the TTFT model, at most one per period.

Input:
  KEYS[1]     the pod's fit samples LIST, newest first ("{unix seconds} {sample JSON}")
  ARGV        now (unix seconds), the period between samples in seconds, the sample JSON,
              how many samples the LIST keeps, its TTL in seconds
Output:
  1 when the sample was kept, 0 when the newest is younger than the period
]]
local newest = redis.call('LINDEX', KEYS[1], 0)
if newest then
  local at = tonumber(string.match(newest, '^(%S+)'))
  if at and tonumber(ARGV[1]) - at < tonumber(ARGV[2]) then
    return 0
  end
end
redis.call('LPUSH', KEYS[1], ARGV[1] .. ' ' .. ARGV[3])
redis.call('LTRIM', KEYS[1], 0, tonumber(ARGV[4]) - 1)
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
