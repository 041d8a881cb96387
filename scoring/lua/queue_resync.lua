-- Re-anchor a pod's virtual queue on what its engine reports (scoring.route_state, the resync
-- rule): the scraper runs it in the transaction that writes the pod's load.
--
-- KEYS: the pod's queue HASH (scoring.keys.queue_key).
-- ARGV: 1 the engine's waiting requests.
-- Reply: the new busy_until_ms, or false when the pod has no queue (nothing routed there
--        lately: nothing to correct, and no key is brought back).
--
-- The queue's predictions drift: each prefill predicted a little short or long moves every
-- later one's start, and requests kvadmin did not route never enter it. The engine's waiting
-- requests, each priced at the queue's moving mean predicted prefill, restart it from Redis'
-- own clock (the one route_record.lua advances it with); what is routed later adds to it.

local mean = tonumber(redis.call('HGET', KEYS[1], 'prefill_ms') or '')
if not mean then
  return false
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local busy = now + math.max(tonumber(ARGV[1]) or 0, 0) * mean
redis.call('HSET', KEYS[1], 'busy_until_ms', string.format('%.3f', busy))
return string.format('%.3f', busy)
