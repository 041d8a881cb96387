-- Record a routing decision and advance the chosen pod's routing state, atomically: one
-- script, so that web processes choosing at once each start their prefill after the other's
-- (the queue advance is computed here, never read-modify-written by a client). Its reader is
-- prefix_walk.lua's routing-state section; scoring/route_record.py builds KEYS and ARGV.
--
-- KEYS: the decision stream, the chosen pod's queue HASH, in-flight ZSET, speculative ZSET,
--       the decision id index ZSET and the outcomes HASH (kvadmin.routing.outcomes).
-- ARGV: 1 the decision entry ("" to leave it out of the log), 2 the stream's MAXLEN (~),
--       3 the request's predicted prefill on the pod in ms (S_est), 4 the decision id,
--       5 the in-flight window ms, 6 the most in-flight entries kept, 7 how long past the
--       predicted prefill end speculative entries last, ms (0: none), 8 the most speculative entries kept, 9 the weight of a new prefill in the queue's
--       moving mean, then the request's block hashes (speculative for the pod).
-- Reply: {the stream entry id or false, the predicted prefill start and end in unix ms}.
-- A logged decision's id goes to the id index (its entry's unix ms) so that its outcome can
-- find it; the index keeps the log's MAXLEN newest ids and their outcomes go with the rest.

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local prefill = math.max(tonumber(ARGV[3]) or 0, 0)
local window, ttl, alpha = tonumber(ARGV[5]), tonumber(ARGV[7]), tonumber(ARGV[9])

local busy = tonumber(redis.call('HGET', KEYS[2], 'busy_until_ms') or '') or 0
local start = math.max(now, busy)
local done = start + prefill
local mean = tonumber(redis.call('HGET', KEYS[2], 'prefill_ms') or '')
mean = mean and (mean + alpha * (prefill - mean)) or prefill
redis.call('HSET', KEYS[2], 'busy_until_ms', string.format('%.3f', done),
  'prefill_ms', string.format('%.3f', mean))
-- Idle state expires: after the queue drains and its requests' decode window passes, plus a
-- minute for the moving mean.
local idle_ms = math.ceil(done - now + window) + 60000
redis.call('PEXPIRE', KEYS[2], idle_ms)

redis.call('ZADD', KEYS[3], done, ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. (now - window))
redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -(tonumber(ARGV[6]) + 1))
redis.call('PEXPIRE', KEYS[3], idle_ms)

-- A speculative entry lasts until ttl after the request's predicted prefill end: its blocks are
-- stored then, and the index hears of them soon after. Counted from the routing instead, an
-- entry outlived its blocks on a pod whose GPU evicted them meanwhile (a block SGLang's
-- write_through_selective never backed up is then gone), and the policy priced hits the pod no
-- longer had.
if #ARGV > 9 and ttl > 0 then
  local expiry = done + ttl
  local CHUNK = 500 -- unpack() is bounded by Lua's C stack
  for first = 10, #ARGV, CHUNK do
    local pairs_ = {}
    for i = first, math.min(#ARGV, first + CHUNK - 1) do
      pairs_[#pairs_ + 1] = expiry
      pairs_[#pairs_ + 1] = ARGV[i]
    end
    redis.call('ZADD', KEYS[4], unpack(pairs_))
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  redis.call('ZREMRANGEBYRANK', KEYS[4], 0, -(tonumber(ARGV[8]) + 1))
  local longest = tonumber(redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')[2])
  redis.call('PEXPIRE', KEYS[4], math.max(math.ceil(longest - now), 1))
end

local id = false
if ARGV[1] ~= '' then
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'd', ARGV[1])
  redis.call('ZADD', KEYS[5], tonumber(string.match(id, '^(%d+)')), ARGV[4])
  local excess = redis.call('ZCARD', KEYS[5]) - tonumber(ARGV[2])
  if excess > 0 then
    local gone = redis.call('ZRANGE', KEYS[5], 0, excess - 1)
    redis.call('ZREMRANGEBYRANK', KEYS[5], 0, excess - 1)
    for first = 1, #gone, 500 do
      redis.call('HDEL', KEYS[6], unpack(gone, first, math.min(#gone, first + 499)))
    end
  end
end
return { id, string.format('%.3f', start), string.format('%.3f', done) }
