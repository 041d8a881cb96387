--[[
One page of one residency ZSET (std -> last store ts), newest first (or oldest first),
strictly after a cursor.

The listing orders blocks by (ts desc, std desc), or (ts asc, std asc) oldest first: Redis
orders members of equal score by their bytes, so that is the ZSET's own reverse (or own) order. A cursor (ts, std) need not be a member of this
ZSET (it came from another pod's, or the block moved since), and the blocks of one script call
of the ingestion share one score, so the start is found by rank: the members scored above ts,
then a binary search by rank inside the run of members scored exactly ts. Work: O(log n)
commands of O(log n) each.

KEYS[1]: the ZSET. ARGV: cursor ts ("" = from the start), cursor std, how many, and "1" for
oldest first.
Returns member, score, member, score, ... (at most "how many" pairs).
Members are decimal digits, so Lua's string comparison agrees with Redis's byte order.
]]
local key, ts, std, count = KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3])
local oldest = ARGV[4] == '1'
local range = oldest and 'ZRANGE' or 'ZREVRANGE'
local start = 0
if ts ~= '' then
  -- The members listed before the run scored ts, then the first of the run after std.
  local lo = oldest and redis.call('ZCOUNT', key, '-inf', '(' .. ts)
    or redis.call('ZCOUNT', key, '(' .. ts, '+inf')
  local hi = lo + redis.call('ZCOUNT', key, ts, ts)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    local member = redis.call(range, key, mid, mid)[1]
    if (oldest and member > std) or (not oldest and member < std) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  start = lo
end
return redis.call(range, key, start, start + count - 1, 'WITHSCORES')
