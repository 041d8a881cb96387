-- Re-anchor a pod's virtual queue on what its engine reports (scoring.route_state, the resync
-- rule): the scraper runs it in the transaction that writes the pod's load.
--
-- KEYS: the pod's queue HASH (scoring.keys.queue_key).
-- ARGV: 1 the engine's waiting requests, 2 its running requests.
-- Reply: the new busy_until_ms, or false when the pod has no queue (nothing routed there
--        lately: nothing to correct, and no key is brought back).
--
-- The queue's predictions drift: each prefill predicted a little short or long moves every
-- later one's start, and requests kvadmin did not route never enter it. The engine's waiting
-- requests, each priced at the queue's moving mean predicted prefill, restart it from Redis'
-- own clock (the one route_record.lua advances it with); what is routed later adds to it.
-- A prefill already running is not among the waiting: while the engine runs anything, the
-- queue's own remaining work beyond the waiting requests' stands for it, up to one mean
-- prefill. scoring.route_state.resynced_busy_until is the rule's reference.

local queue = redis.call('HMGET', KEYS[1], 'prefill_ms', 'busy_until_ms')
local mean = tonumber(queue[1] or '')
if not mean then
  return false
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local waiting = math.max(tonumber(ARGV[1]) or 0, 0) * mean
local running = 0
if (tonumber(ARGV[2]) or 0) > 0 then
  local ahead = (tonumber(queue[2] or '') or 0) - now - waiting
  running = math.min(math.max(ahead, 0), mean)
end
local busy = now + waiting + running
redis.call('HSET', KEYS[1], 'busy_until_ms', string.format('%.3f', busy))
return string.format('%.3f', busy)
