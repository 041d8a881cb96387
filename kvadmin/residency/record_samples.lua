--[[
The pod samples' retention rule (kvadmin/residency/samples.py), applied to every pod's sample
taken at ARGV[1] in one call, so a sample is in both of its pod's ZSETs or in neither, and the
beat's samples land for every pod or for none.
KEYS: per pod, its full-resolution ZSET then its downsampled one. ARGV[2]: the seconds the
first keeps every sample; ARGV[3]: the step of the second, which keeps the first sample of each
step; ARGV[4]: the seconds it keeps them; ARGV[4 + i]: the i-th pod's sample (JSON).
Each ZSET expires as long after its pod's last sample as it keeps samples, so a pod no longer
sampled loses its history then. Work per pod: a few O(log n) commands, plus the samples aged out.
A pod without a downsampled ZSET whose full-resolution one holds older samples (a history
written before downsampling, which kept every sample for the day) has those downsampled into
it first, so an upgrade loses no history: once per pod, O(samples).
]]
local now = tonumber(ARGV[1])
local full, step, retention = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local first = now - now % step
for i = 1, #KEYS, 2 do
  local sample = ARGV[4 + (i + 1) / 2]
  local recent, downsampled = KEYS[i], KEYS[i + 1]
  if redis.call('EXISTS', downsampled) == 0 then
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
return #KEYS / 2
