-- The prefix walk of compatibility.md 2.4 (steps 1 and 2) inside Redis; its Python twin is
-- scoring.score.walk_prefix, and both must give the same PrefixWalk on every index.
--
-- Input: no KEYS, one ARGV, a msgpack array {KEYS, ARGV} of the two lists below (unpacked in
-- C; sent as some 400 arguments, their packing by redis-py cost more Python than the walk's
-- reply. The keys are read undeclared: the index is on one Redis primary, never a Cluster).
-- KEYS: the request's block keys, in block order; then the pods' start keys; then, per pod
--       of the routing-state section, its queue, in-flight and load keys, and after them the
--       model's speculative blocks and groups hashes (scoring.keys.speculative_key).
-- ARGV: "1" when only the listed pods are candidates, "0" when every pod is; the number of
--       block keys; three parts of kvadmin's residency key layout, "" for the tiered value
--       format (the values name the media) and for the legacy one (scoring.index's
--       _residency_args): the media SET key's prefix before the pod, and a residency ZSET key's
--       parts before and after the pod (the medium follows); the number t of triples; then t triples (pod id, unix second of its last
--       start as decimal text, "" if unknown, n) listing the candidates, or with "0" the pods
--       whose start may be known: the pod's next n start keys are its data-parallel ranks'
--       stream status hashes, whose `started_at` is the start of the rank's current run; the
--       earliest of them is a start of the pod, unknown while a rank has none
--       (scoring.values.pod_start), and the later of it and the given start counts.
--       Then the routing-state section: its number of pods q (0: none), "now" in unix ms (""
--       for Redis' own clock, the one route_record.lua advances the queue with), the
--       in-flight window in ms, and the q pods.
-- Reply: {c, s, p, the c non-candidate owners of the first block, the s stale-dropped pods,
--         then for each of the p pods holding the first block: pod, r, r pairs (medium, blocks)},
--         the pairs being the runs of media of its matched blocks (false for no medium);
--         under the legacy format each pod's pairs are followed by its residency: M, then M
--         times (medium, q, q pairs (0-based position, blocks)), the spans of its matched
--         blocks held in that medium ("" for no medium).
--         With q > 0 it goes on: now (unix ms), then per state pod, in order: the queue's
--         busy_until_ms, prefill_ms, wait_log, prefill_log, prefill_offset and prefill_version
--         (scoring.keys.QUEUE_FIELDS), the in-flight count (predicted prefill end within the
--         window or later), the load hash's running, waiting, kv_usage and scraped_at (false
--         where missing), k, and k pairs (0-based position, blocks): the spans of the request's
--         blocks with an unexpired speculative entry for the pod, up to its reach (the first
--         block past its matched run without one: later entries cannot extend its match).
--
-- Why it is fast: after the first block only the pods still matching are read (HMGET); a block
-- whose values all repeat the previous block's is only counted; a value is parsed only when it
-- changes; the walk ends at the first block that leaves no pod matching, so the blocks after the
-- matched prefix are never read; and only runs of media cross the wire. The speculative entries
-- are read the same way: one short hash field per block for every candidate at once (the id of
-- its group of entries), a group decoded only where it changes, and the lookups end at the
-- first block no candidate reaches.

local find, sub, match, tonumber, unpack = string.find, string.sub, string.match, tonumber, unpack
local input = cmsgpack.unpack(ARGV[1])
local KEYS, ARGV = input[1], input[2]
local HMGET_CHUNK = 1000 -- unpack() is bounded by Lua's C stack

local restricted = ARGV[1] == '1'
local n_blocks = tonumber(ARGV[2])
local media_prefix, res_prefix, res_between = ARGV[3], ARGV[4], ARGV[5]
local legacy = media_prefix ~= ''
local state_at = 7 + 3 * tonumber(ARGV[6]) -- where the routing-state section's ARGV start
local is_candidate, started, started_text = {}, {}, {}
local start_key = n_blocks
for i = 7, state_at - 1, 3 do
  local pod, start = ARGV[i], ARGV[i + 1]
  is_candidate[pod] = true
  local n_ranks, earliest = tonumber(ARGV[i + 2]), nil
  for r = 1, n_ranks do
    local recorded = redis.call('HGET', KEYS[start_key + r], 'started_at')
    if not recorded then
      earliest = nil
      break
    end
    if not earliest or tonumber(recorded) < tonumber(earliest) then
      earliest = recorded
    end
  end
  start_key = start_key + n_ranks
  if earliest and (start == '' or tonumber(earliest) > tonumber(start)) then
    start = earliest
  end
  if start ~= '' then
    started[pod], started_text[pod] = tonumber(start), start
  end
end

--- @include "stale"

-- "ts|MEDIUM" as (ts, medium); the first "|" splits, false is no medium ("ts" or "ts|").
local function split(value)
  local bar = find(value, '|', 1, true)
  if not bar then
    return value, false
  end
  local medium = sub(value, bar + 1)
  return sub(value, 1, bar - 1), medium ~= '' and medium
end

local function hmget(key, pods, n)
  if n <= HMGET_CHUNK then
    return redis.call('HMGET', key, unpack(pods, 1, n))
  end
  local values = {}
  for first = 1, n, HMGET_CHUNK do
    local chunk = redis.call('HMGET', key, unpack(pods, first, math.min(n, first + HMGET_CHUNK - 1)))
    for j = 1, #chunk do
      values[first + j - 1] = chunk[j]
    end
  end
  return values
end

-- Pods holding the first block get ids 1..n_scored; per id, the runs of media of its matched
-- blocks (the last run still open, its length in `open_run`). The pods still matching are
-- `active_ids`/`active_names`, and `last` holds their values at the previous block, by position.
local non_candidates, stale = {}, {}
local names, run_media, run_blocks, open_run = {}, {}, {}, {}
local active_ids, active_names, last, n_active = {}, {}, {}, 0

local first = n_blocks > 0 and redis.call('HGETALL', KEYS[1]) or {}
for i = 1, #first, 2 do
  local pod, value = first[i], first[i + 1]
  if restricted and not is_candidate[pod] then
    non_candidates[#non_candidates + 1] = pod
  else
    local timestamp, medium = split(value)
    if is_stale(pod, timestamp) then
      stale[#stale + 1] = pod
    else
      n_active = n_active + 1
      names[n_active], run_media[n_active], run_blocks[n_active] = pod, { medium }, {}
      open_run[n_active] = 1
      active_ids[n_active], active_names[n_active], last[n_active] = n_active, pod, value
    end
  end
end
local n_scored = n_active

-- Blocks stored by the same events carry the same values, so most blocks repeat the previous
-- one for every active pod: such a block is only counted in `repeats` (fresh again, same media),
-- and the count is added to the open runs before the next block that differs.
local repeats = 0

local function add_repeats()
  for j = 1, n_active do
    local id = active_ids[j]
    open_run[id] = open_run[id] + repeats
  end
  repeats = 0
end

for b = 2, n_blocks do
  if n_active == 0 then
    break
  end
  local values = hmget(KEYS[b], active_names, n_active)
  local same = true
  for j = 1, n_active do
    if values[j] ~= last[j] then
      same = false
      break
    end
  end
  if same then
    repeats = repeats + 1
  else
    add_repeats()
    local kept = 0
    for j = 1, n_active do
      local value, id, pod = values[j], active_ids[j], active_names[j]
      local matches = value and true
      if value and value ~= last[j] then
        local timestamp, medium = split(value)
        if is_stale(pod, timestamp) then
          stale[#stale + 1] = pod
          matches = false
        else
          local media = run_media[id]
          if media[#media] ~= medium then
            local blocks = run_blocks[id]
            blocks[#blocks + 1] = open_run[id]
            media[#media + 1], open_run[id] = medium, 0
          end
        end
      end
      if matches then
        open_run[id] = open_run[id] + 1
        kept = kept + 1
        active_ids[kept], active_names[kept], last[kept] = id, pod, value
      end
    end
    n_active = kept
  end
end
add_repeats()

-- The request's block hashes, taken from their keys (one model, one prefix) when first needed.
local members
local function block_members()
  if not members then
    members = {}
    local at = #KEYS[1] - #match(KEYS[1], '@([^@]*)$')
    for b = 1, n_blocks do
      members[b] = sub(KEYS[b], at + 1)
    end
  end
  return members
end

--- @include "residency"

local reply = { #non_candidates, #stale, n_scored }
local matched = {} -- pod -> blocks of its matched run
for _, pod in ipairs(non_candidates) do
  reply[#reply + 1] = pod
end
for _, pod in ipairs(stale) do
  reply[#reply + 1] = pod
end
for id = 1, n_scored do
  local media, blocks = run_media[id], run_blocks[id]
  blocks[#blocks + 1] = open_run[id]
  reply[#reply + 1] = names[id]
  reply[#reply + 1] = #media
  local k = 0
  for r = 1, #media do
    reply[#reply + 1] = media[r]
    reply[#reply + 1] = blocks[r]
    k = k + blocks[r]
  end
  matched[names[id]] = k
  if legacy then
    add_residency(reply, names[id], k)
  end
end

--- @include "speculative_spans"

-- The routing state of the `ttft` policy (scoring.route_state), same round trip.
local n_state = tonumber(ARGV[state_at] or '0')
if n_state > 0 then
  local now = tonumber(ARGV[state_at + 1])
  if not now then
    local clock = redis.call('TIME')
    now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  end
  local in_flight_since = '(' .. (now - tonumber(ARGV[state_at + 2]))
  reply[#reply + 1] = now
  local key = start_key
  local spec_at = start_key + 3 * n_state
  local spans = speculative_spans(now, n_state, state_at + 3, KEYS[spec_at + 1], KEYS[spec_at + 2])
  for i = 1, n_state do
    local queue = redis.call('HMGET', KEYS[key + 1], 'busy_until_ms', 'prefill_ms', 'wait_log',
      'prefill_log', 'prefill_offset', 'prefill_version')
    for j = 1, 6 do
      reply[#reply + 1] = queue[j]
    end
    reply[#reply + 1] = redis.call('ZCOUNT', KEYS[key + 2], in_flight_since, '+inf')
    local load = redis.call('HMGET', KEYS[key + 3], 'running', 'waiting', 'kv_usage', 'scraped_at')
    for j = 1, 4 do
      reply[#reply + 1] = load[j]
    end
    local pod_spans = spans[i]
    reply[#reply + 1] = #pod_spans / 2
    for j = 1, #pod_spans, 2 do
      reply[#reply + 1] = pod_spans[j] - 1
      reply[#reply + 1] = pod_spans[j + 1]
    end
    key = key + 3
  end
end
return reply
