--[[
One page of one residency ZSET (std -> last store ts), newest first, strictly after a cursor.

The listing orders blocks by (ts desc, std desc): Redis orders members of equal score by their
bytes, so that is the ZSET's own reverse order. A cursor (ts, std) need not be a member of this
ZSET (it came from another pod's, or the block moved since), and the blocks of one script call
of the ingestion share one score, so the start is found by rank: the members scored above ts,
then a binary search by rank inside the run of members scored exactly ts. Work: O(log n)
commands of O(log n) each.

KEYS[1]: the ZSET. ARGV: cursor ts ("" = from the newest), cursor std, how many.
Returns member, score, member, score, ... (at most "how many" pairs).
Members are decimal digits, so Lua's string comparison agrees with Redis's byte order.
]]
local key, ts, std, count = KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3])
local start = 0
if ts ~= '' then
  local lo = redis.call('ZCOUNT', key, '(' .. ts, '+inf')
  local hi = lo + redis.call('ZCOUNT', key, ts, ts)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if redis.call('ZREVRANGE', key, mid, mid)[1] < std then
      hi = mid
    else
      lo = mid + 1
    end
  end
  start = lo
end
return redis.call('ZREVRANGE', key, start, start + count - 1, 'WITHSCORES')
