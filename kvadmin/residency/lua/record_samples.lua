--[[
The pod samples' retention rule (kvadmin/residency/samples.py), applied to every pod's sample
taken at ARGV[1] in one call, so a sample is in both of its pod's ZSETs or in neither, and the
beat's samples land for every pod or for none.
KEYS: per pod, its full-resolution ZSET then its downsampled one. ARGV[2]: the seconds the
first keeps every sample; ARGV[3]: the step of the second, which keeps the first sample of each
step; ARGV[4]: the seconds it keeps them; ARGV[5]: how many old samples one call may
downsample (below); ARGV[5 + i]: the i-th pod's sample (JSON).
Each ZSET expires as long after its pod's last sample as it keeps samples, so a pod no longer
sampled loses its history then. Work per pod: a few O(log n) commands, plus the samples aged out.

A pod without a downsampled ZSET whose full-resolution one holds older samples (a history
written before downsampling, which kept every sample for the day) has those downsampled into
it first, so an upgrade loses no history. That is O(samples) per pod (17,000 for a day), so one
call downsamples at most ARGV[5] samples' worth of pods (always at least one pod): a pod left
for a later call gets its new sample alone, its day kept whole meanwhile, and Redis is never
held for long whatever the fleet's size.
]]
local now = tonumber(ARGV[1])
local full, step, retention = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local first = now - now % step
local budget, downsampled_pods = tonumber(ARGV[5]), 0
for i = 1, #KEYS, 2 do
  local sample = ARGV[5 + (i + 1) / 2]
  local recent, downsampled = KEYS[i], KEYS[i + 1]
  local old = 0
  if redis.call('EXISTS', downsampled) == 0 then
    old = redis.call('ZCOUNT', recent, '-inf', '(' .. (now - full))
  end
  if old > budget and downsampled_pods > 0 then
    -- Its turn comes in a later call: the new sample alone, the old day kept whole.
    redis.call('ZADD', recent, now, sample)
    redis.call('EXPIRE', recent, retention)
  else
    if old > 0 then
      budget, downsampled_pods = budget - old, downsampled_pods + 1
      local older = redis.call('ZRANGE', recent, '-inf', '(' .. (now - full), 'BYSCORE', 'WITHSCORES')
      local kept = nil
      for j = 1, #older, 2 do
        local at = tonumber(older[j + 1])
        if at >= now - retention and (kept == nil or at >= kept + step - kept % step) then
          redis.call('ZADD', downsampled, at, older[j])
          kept = at
        end
      end
    end
    redis.call('ZADD', recent, now, sample)
    redis.call('ZREMRANGEBYSCORE', recent, '-inf', '(' .. (now - full))
    redis.call('EXPIRE', recent, full)
    if redis.call('ZCOUNT', downsampled, first, '(' .. (first + step)) == 0 then
      redis.call('ZADD', downsampled, now, sample)
      redis.call('ZREMRANGEBYSCORE', downsampled, '-inf', '(' .. (now - retention))
      redis.call('EXPIRE', downsampled, retention)
    end
  end
end
return #KEYS / 2
