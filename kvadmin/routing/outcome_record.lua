-- Record a decision's outcome once, and add it to the hit accounting in the same step: two
-- processes posting the same outcome at once get one "recorded" and one "repeated", and the
-- accounting counts it once. kvadmin/routing/outcomes.py builds KEYS and ARGV.
--
-- KEYS: 1 the decision id index ZSET, 2 the outcomes HASH, 3 this minute's outcome bucket,
--       then one counter family HASH per tally.
-- ARGV: 1 the decision id, 2 the outcome JSON, 3 the counters' label field (model US pod),
--       4 the bucket's TTL in seconds, then per tally (in KEYS order): its name, its amount.
-- Reply: "recorded", "repeated", or "unknown" (the decision left the log).

if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 'unknown'
end
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then
  return 'repeated'
end
for i = 4, #KEYS do
  local name, amount = ARGV[5 + 2 * (i - 4)], ARGV[6 + 2 * (i - 4)]
  redis.call('HINCRBY', KEYS[i], ARGV[3], amount)
  redis.call('HINCRBY', KEYS[3], ARGV[3] .. '\30' .. name, amount)
end
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[4]))
return 'recorded'
