-- Record a routing decision and advance the chosen pod's routing state, atomically: one
-- script, so that web processes choosing at once each start their prefill after the other's
-- (the queue advance is computed here, never read-modify-written by a client). Its reader is
-- prefix_walk.lua's routing-state section; scoring/route_record.py builds KEYS and ARGV.
--
-- KEYS: the decision stream, the chosen pod's queue HASH and in-flight ZSET, the model's five
--       speculative keys (scoring.keys: blocks, groups, group references, records, count), the
--       decision id index ZSET and the outcomes HASH (kvadmin.routing.outcomes).
-- ARGV: 1 the decision entry ("" to leave it out of the log), 2 the stream's MAXLEN (~),
--       3 the request's predicted prefill on the pod in ms (S_est), 4 the decision id,
--       5 the in-flight window ms, 6 the most in-flight entries kept, 7 how long past the
--       predicted prefill end speculative entries last, ms (0: none), 8 the most speculative
--       entries kept per model, 9 the weight of a new prefill in the queue's moving mean,
--       10 the pod, then the request's block hashes (speculative for the pod).
-- Reply: {the stream entry id or false, the predicted prefill start and end in unix ms}.
-- A logged decision's id goes to the id index (its entry's unix ms) so that its outcome can
-- find it; the index keeps the log's MAXLEN newest ids and their outcomes go with the rest.

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local prefill = math.max(tonumber(ARGV[3]) or 0, 0)
local window, ttl, alpha = tonumber(ARGV[5]), tonumber(ARGV[7]), tonumber(ARGV[9])
local IDS, OUTCOMES = KEYS[9], KEYS[10]

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
--
-- The layout (scoring.keys.speculative_keys): each block of the model names a group, and a
-- group lists its entries once, [pod, expiry, ...] sorted by pod (JSON, expiries as exact
-- "%.17g" text), named by its content's SHA1 and counted by the blocks naming it. The blocks
-- one request routes share their groups, so prefix_walk.lua reads one short field per block
-- for every candidate at once and decodes a group only where it changes. A decision points
-- its blocks at new groups: their old group's entries with its pod's replaced and the expired
-- left out. A group no block names is deleted at once. Cleaning: each decision is a record
-- (pod and blocks, by expiry); a decision first drops the blocks of up to SWEEP expired
-- records whose group has expired (it adds one record, so expired blocks cannot pile up), and
-- when the model's records hold more than the most entries kept, the earliest-expiring
-- records' entries go first. All five keys expire with the newest record.
local SPEC, GROUPS, REFS, RECORDS, COUNT = KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local SWEEP, CHUNK = 16, 500 -- CHUNK: unpack() is bounded by Lua's C stack
-- A field value longer than any listpack holds keeps the blocks hash a hashtable: as a
-- listpack (up to hash-max-listpack-entries fields) every lookup would scan it.
local HASHTABLE_FIELD, HASHTABLE_VALUE = '', string.rep('-', 4096)

local function each_chunk(list, size, command, key)
  for first = 1, #list, size do
    redis.call(command, key, unpack(list, first, math.min(#list, first + size - 1)))
  end
end

local decoded = {} -- group -> its entries, each group decoded once per call
local function entries_of(group)
  if not group then
    return {}
  end
  if not decoded[group] then
    local content = redis.call('HGET', GROUPS, group)
    decoded[group] = content and cjson.decode(content) or {}
  end
  return decoded[group]
end

local function expires_after(group, moment)
  local entries = entries_of(group)
  for e = 2, #entries, 2 do
    if tonumber(entries[e]) > moment then
      return true
    end
  end
  return false
end

-- The id of the group of `entries` (stored if new), false for none.
local function group_of(entries)
  if #entries == 0 then
    return false
  end
  local content = cjson.encode(entries)
  local group = string.sub(redis.sha1hex(content), 1, 16)
  redis.call('HSETNX', GROUPS, group, content)
  decoded[group] = entries
  return group
end

-- `entries` without `pod`'s entry if it expires by `by` and without any expired at `now`; with
-- `add`, `pod`'s entry is then (re)placed, in pod order, with expiry `add`.
local function edit(entries, pod, by, add)
  local kept, placed = {}, not add
  for e = 1, #entries, 2 do
    local other, expiry = entries[e], tonumber(entries[e + 1])
    if not placed and pod < other then
      kept[#kept + 1], kept[#kept + 2], placed = pod, add, true
    end
    if expiry > now and (other ~= pod or (not add and expiry > by)) then
      kept[#kept + 1], kept[#kept + 2] = other, entries[e + 1]
    end
  end
  if not placed then
    kept[#kept + 1], kept[#kept + 2] = pod, add
  end
  return kept
end

-- Point each of `blocks` at the group `change(its group or false)` gives (false: none); a
-- block naming the previous block's group gets the previous block's answer. Groups no block
-- names any more are deleted.
local function rewrite(blocks, change)
  local groups = {}
  for first = 1, #blocks, CHUNK do
    local last = math.min(#blocks, first + CHUNK - 1)
    local chunk = redis.call('HMGET', SPEC, unpack(blocks, first, last))
    for j = 1, last - first + 1 do
      groups[first + j - 1] = chunk[j]
    end
  end
  local set, gone, refs = {}, {}, {}
  local before, after = nil, nil
  for j = 1, #blocks do
    local old = groups[j]
    if old ~= before then
      before, after = old, change(old)
    end
    if after ~= old then
      if old then
        refs[old] = (refs[old] or 0) - 1
      end
      if after then
        refs[after] = (refs[after] or 0) + 1
        set[#set + 1], set[#set + 2] = blocks[j], after
      else
        gone[#gone + 1] = blocks[j]
      end
    end
  end
  each_chunk(gone, CHUNK, 'HDEL', SPEC)
  if #set > 0 then
    -- Written once (a no-op HSETNX is not replicated): not 4 KB more per decision in the AOF.
    redis.call('HSETNX', SPEC, HASHTABLE_FIELD, HASHTABLE_VALUE)
    each_chunk(set, 2 * CHUNK, 'HSET', SPEC)
  end
  for group, delta in pairs(refs) do
    if delta ~= 0 and redis.call('HINCRBY', REFS, group, delta) <= 0 then
      redis.call('HDEL', GROUPS, group)
      redis.call('HDEL', REFS, group)
    end
  end
end

-- A record's pod and blocks.
local function parts_of(record)
  local parts = cjson.decode(record)
  return table.remove(parts, 1), parts
end

if #ARGV > 10 and ttl > 0 then
  local removed = 0
  for _, record in ipairs(redis.call('ZRANGEBYSCORE', RECORDS, '-inf', now, 'LIMIT', 0, SWEEP)) do
    local _, blocks = parts_of(record)
    rewrite(blocks, function(group)
      return group and expires_after(group, now) and group
    end)
    redis.call('ZREM', RECORDS, record)
    removed = removed + #blocks
  end

  local pod, blocks, parts = ARGV[10], {}, { ARGV[10] }
  for i = 11, #ARGV do
    blocks[#blocks + 1], parts[#parts + 1] = ARGV[i], ARGV[i]
  end
  local expiry = string.format('%.17g', done + ttl)
  rewrite(blocks, function(group)
    return group_of(edit(entries_of(group), pod, now, expiry))
  end)
  local added = redis.call('ZADD', RECORDS, expiry, cjson.encode(parts)) * #blocks
  local count = redis.call('INCRBY', COUNT, added - removed)
  while count > tonumber(ARGV[8]) do
    local earliest = redis.call('ZPOPMIN', RECORDS)
    if #earliest == 0 then
      break
    end
    local evicted, evicted_blocks = parts_of(earliest[1])
    local by = tonumber(earliest[2])
    rewrite(evicted_blocks, function(group)
      return group and group_of(edit(entries_of(group), evicted, by, nil))
    end)
    count = redis.call('DECRBY', COUNT, #evicted_blocks)
  end

  local longest = redis.call('ZRANGE', RECORDS, -1, -1, 'WITHSCORES')[2]
  if longest then
    for _, key in ipairs({ SPEC, GROUPS, REFS, RECORDS, COUNT }) do
      redis.call('PEXPIRE', key, math.max(math.ceil(tonumber(longest) - now), 1))
    end
  else
    redis.call('DEL', SPEC, GROUPS, REFS, RECORDS, COUNT)
  end
end

local id = false
if ARGV[1] ~= '' then
  id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'd', ARGV[1])
  redis.call('ZADD', IDS, tonumber(string.match(id, '^(%d+)')), ARGV[4])
  local excess = redis.call('ZCARD', IDS) - tonumber(ARGV[2])
  if excess > 0 then
    local gone = redis.call('ZRANGE', IDS, 0, excess - 1)
    redis.call('ZREMRANGEBYRANK', IDS, 0, excess - 1)
    for first = 1, #gone, 500 do
      redis.call('HDEL', OUTCOMES, unpack(gone, first, math.min(#gone, first + 499)))
    end
  end
end
return { id, string.format('%.3f', start), string.format('%.3f', done) }
