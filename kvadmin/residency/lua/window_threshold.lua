--[[
The newest store time T with at least ARGV[1] block copies scored T or later across the
residency ZSETs KEYS (the sort by owners' window, kvadmin/residency/ranking.py), found by a
binary search over the scores between the oldest and the newest copy: one ZCOUNT per ZSET a
step, about 40 steps, all inside Redis instead of a round trip each. Returns "-inf" when the
ZSETs hold no more than ARGV[1] copies.
Work: O(len(KEYS) x log(score range) x log n).
]]
local size = tonumber(ARGV[1])
-- Scores are whole microseconds (below 2^53, exact as Lua numbers); passed to Redis as
-- integer text, since a Lua number's own text keeps only 14 digits.
local function text(score)
  return string.format('%.0f', score)
end
local function copies(low)
  local total = 0
  for _, key in ipairs(KEYS) do
    total = total + redis.call('ZCOUNT', key, type(low) == 'number' and text(low) or low, '+inf')
  end
  return total
end
if copies('-inf') <= size then
  return '-inf'
end
local low, high
for _, key in ipairs(KEYS) do
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2]
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]
  if first then
    low = math.min(low or tonumber(first), tonumber(first))
    high = math.max(high or tonumber(last), tonumber(last))
  end
end
while low < high do
  local mid = math.floor((low + high + 1) / 2)
  if copies(mid) >= size then
    low = mid
  else
    high = mid - 1
  end
end
return text(low)
