--[[
A decision's metric updates in one call (kvadmin/metrics/recorder.py `Increments`): the same
hashes, fields and values as the commands themselves, in the same order.

Input:
  KEYS        the hashes updated
  ARGV        (op, key index, field, value) quadruples: "i" HINCRBY, "f" HINCRBYFLOAT,
              "e" EXPIRE (its field is "")
Output:
  nothing
]]
for i = 1, #ARGV, 4 do
  local op, key = ARGV[i], KEYS[tonumber(ARGV[i + 1])]
  if op == 'i' then
    redis.call('HINCRBY', key, ARGV[i + 2], ARGV[i + 3])
  elseif op == 'f' then
    redis.call('HINCRBYFLOAT', key, ARGV[i + 2], ARGV[i + 3])
  else
    redis.call('EXPIRE', key, ARGV[i + 3])
  end
end
