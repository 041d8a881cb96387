--[[
Compare and set matrix values (the value-format rewrite, kvadmin/index/value_format.py): a
value the writer changed since it was read stays as the writer left it.

Input:
  KEYS        matrix keys, any number
  ARGV        per key: n, then n triples (field, expected value, new value)
Output:
  the number of values written
]]
local at, written = 1, 0
for i = 1, #KEYS do
  local n = tonumber(ARGV[at])
  at = at + 1
  for _ = 1, n do
    local field, expected, new = ARGV[at], ARGV[at + 1], ARGV[at + 2]
    at = at + 3
    if redis.call('HGET', KEYS[i], field) == expected then
      redis.call('HSET', KEYS[i], field, new)
      written = written + 1
    end
  end
end
return written
