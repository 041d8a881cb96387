-- Record a decision's outcome once, and add it to the hit accounting in the same step: two
-- processes posting the same outcome at once get one "recorded" and one "repeated", and the
-- accounting counts it once; a timed outcome is also appended to the outcome log, which
-- calibration follows (kvadmin.weights.evidence_window). kvadmin/routing/outcomes.py builds
-- KEYS and ARGV.
--
-- KEYS: 1 the decision id index ZSET, 2 the outcomes HASH, 3 this minute's outcome bucket,
--       then one counter family HASH per tally, then one histogram family HASH per timing
--       observed (none when the outcome reported no time to first token), then the outcome
--       log STREAM, then the chosen pod's queue HASH when the outcome corrects its wait.
-- ARGV: 1 the decision id, 2 the outcome JSON, 3 the counters' label field (model US pod),
--       4 the bucket's TTL in seconds, 5 the number of tallies, then per tally (in KEYS
--       order): its name, its amount; then the number of timings, and per timing (in KEYS
--       order): its name, its bucket index, the histogram's value (seconds for a time), the
--       minute bucket's (ms for a time); then the decision's entry for the outcome log (""
--       when the outcome times nothing: it is not logged) and the log's cap; then, with the
--       queue key, the wait correction's
--       inputs: the predicted wait, predicted prefill and delivered TTFT in seconds, the
--       learning share, the step bound, the least share of the predicted TTFT the wait must
--       be, the factor's bounds as logs (low, high); then the prefill correction's: the
--       decision's weights version, the prefill factor's bounds as logs (low, high), the
--       predicted prefill before any correction, the outcomes before an offset is fitted, the
--       offset's ridge, the offset's bounds in seconds (low, high); then the
--       log of the wait factor the decision's wait included.
-- Reply: "recorded", "repeated", or "unknown" (the decision left the log).
--
-- The wait correction is scoring.route_state.corrected_wait_log, step for step, and the
-- prefill correction corrected_prefill_fit (on the outcomes the wait's leaves out): a factor
-- and an offset fitted from the means kept in `prefill_fit`. It is learned against one weights
-- version (`prefill_version`): an outcome of a later version starts it again from none, one of
-- an earlier version is not counted. A queue that expired (the pod idle for a minute) is not
-- brought back by a late outcome.

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
local timings = tonumber(ARGV[6 + 2 * tallies])
local at = 7 + 2 * tallies
for k = 4 + tallies, 3 + tallies + timings do
  local name, bucket, observed, minute = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  redis.call('HINCRBY', KEYS[k], labels .. '\30' .. bucket, 1)
  redis.call('HINCRBYFLOAT', KEYS[k], labels .. '\30sum', observed)
  redis.call('HINCRBYFLOAT', KEYS[3], labels .. '\30' .. name, minute)
  redis.call('HINCRBY', KEYS[3], labels .. '\30' .. name .. '_n', 1)
  at = at + 4
end
redis.call('EXPIRE', KEYS[3], tonumber(ARGV[4]))
if ARGV[at] ~= '' then
  redis.call('XADD', KEYS[4 + tallies + timings], 'MAXLEN', '~', ARGV[at + 1], '*',
             'd', ARGV[at], 'o', ARGV[2])
end
at = at + 2

local queue = KEYS[5 + tallies + timings]
if queue and redis.call('HEXISTS', queue, 'busy_until_ms') == 1 then
  local wait, prefill, delivered = tonumber(ARGV[at]), tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2])
  local share, bound, least = tonumber(ARGV[at + 3]), tonumber(ARGV[at + 4]), tonumber(ARGV[at + 5])
  local low, high = tonumber(ARGV[at + 6]), tonumber(ARGV[at + 7])
  local stepped = function(old, took, predicted, least_log, most_log)
    local ratio = math.log(math.max(took, predicted * math.exp(least_log)) / predicted)
    ratio = math.min(math.max(ratio, -bound), bound)
    return string.format('%.17g', math.min(math.max(old + share * ratio, least_log), most_log))
  end
  if wait > 0 and wait >= least * (wait + prefill) then
    -- Against the wait as the factor now holds it, not as the decision priced it.
    local old = tonumber(redis.call('HGET', queue, 'wait_log') or '') or 0
    local now = wait * math.exp(old - tonumber(ARGV[at + 16]))
    redis.call('HSET', queue, 'wait_log', stepped(old, delivered - prefill, now, low, high))
  elseif prefill > 0 then
    local version, uncorrected = tonumber(ARGV[at + 8]), tonumber(ARGV[at + 11])
    local held = redis.call('HMGET', queue, 'prefill_version', 'prefill_fit')
    local learned = tonumber(held[1] or '')
    if uncorrected > 0 and (learned == nil or learned <= version) then
      local fit = {}
      for part in string.gmatch(held[2] or '', '%S+') do
        fit[#fit + 1] = tonumber(part)
      end
      local n, mx, my, mxx, mxy = fit[1], fit[2], fit[3], fit[4], fit[5]
      if learned ~= version or #fit ~= 5 or not (n and mx and my and mxx and mxy) or n < 1 then
        local x = uncorrected
        n, mx, my, mxx, mxy = 0, x, x, x * x, x * x
      end
      local took = delivered - math.max(wait, 0)
      local y = math.min(math.max(took, prefill * math.exp(tonumber(ARGV[at + 9]))),
                         prefill * math.exp(bound))
      local x = uncorrected
      mx, my = mx + share * (x - mx), my + share * (y - my)
      mxx, mxy = mxx + share * (x * x - mxx), mxy + share * (x * y - mxy)
      n = math.min(n + 1, 1000000)
      local least_n, ridge = tonumber(ARGV[at + 12]), 1 + tonumber(ARGV[at + 13])
      local factor = mxy / mxx
      if n >= least_n then
        factor = (ridge * mxy - mx * my) / (ridge * mxx - mx * mx)
      end
      factor = math.min(math.max(factor, math.exp(tonumber(ARGV[at + 9]))),
                        math.exp(tonumber(ARGV[at + 10])))
      local offset = 0
      if n >= least_n then
        offset = math.min(math.max((my - factor * mx) / ridge, tonumber(ARGV[at + 14])),
                          tonumber(ARGV[at + 15]))
      end
      local g = function(value) return string.format('%.17g', value) end
      redis.call('HSET', queue, 'prefill_log', g(math.log(factor)), 'prefill_offset', g(offset),
                 'prefill_version', ARGV[at + 8],
                 'prefill_fit', table.concat({n, g(mx), g(my), g(mxx), g(mxy)}, ' '))
    end
  end
end
return 'recorded'
