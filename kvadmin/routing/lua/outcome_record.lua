-- Record a decision's outcome once, and add it to the hit accounting in the same step: two
-- processes posting the same outcome at once get one "recorded" and one "repeated", and the
-- accounting counts it once. kvadmin/routing/outcomes.py builds KEYS and ARGV.
--
-- KEYS: 1 the decision id index ZSET, 2 the outcomes HASH, 3 this minute's outcome bucket,
--       then one counter family HASH per tally, then one histogram family HASH per timing
--       observed (none when the outcome reported no time to first token).
-- ARGV: 1 the decision id, 2 the outcome JSON, 3 the counters' label field (model US pod),
--       4 the bucket's TTL in seconds, 5 the number of tallies, then per tally (in KEYS
--       order): its name, its amount; then per timing (in KEYS order): its name, its bucket
--       index, its value in seconds, its value in ms.
-- Reply: "recorded", "repeated", or "unknown" (the decision left the log).

if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 'unknown'
end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then
  return 'repeated'
end
local labels, tallies = ARGV[3], tonumber(ARGV[5])
for i = 1, tallies do
  local name, amount = ARGV[4 + 2 * i], ARGV[5 + 2 * i]
  redis.call('HINCRBY', KEYS[3 + i], labels, amount)
  redis.call('HINCRBY', KEYS[3], labels .. '\30' .. name, amount)
end
local at = 6 + 2 * tallies
for k = 4 + tallies, #KEYS do
  local name, bucket, seconds, ms = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  redis.call('HINCRBY', KEYS[k], labels .. '\30' .. bucket, 1)
  redis.call('HINCRBYFLOAT', KEYS[k], labels .. '\30sum', seconds)
  redis.call('HINCRBYFLOAT', KEYS[3], labels .. '\30' .. name, ms)
  redis.call('HINCRBY', KEYS[3], labels .. '\30' .. name .. '_n', 1)
  at = at + 4
end
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[4]))
return 'recorded'
