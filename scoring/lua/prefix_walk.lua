-- The prefix walk of compatibility.md 2.4 (steps 1 and 2) inside Redis; its Python twin is
-- scoring.score.walk_prefix, and both must give the same PrefixWalk on every index.
--
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
--         busy_until_ms and prefill_ms, the in-flight count (predicted prefill end within the
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

-- A decimal integer as (negative, digits without leading zeros), nil if text is not one.
local function canonical(text)
  local sign, digits = match(text, '^([+-]?)([0-9]+)$')
  if not digits then
    return nil
  end
  digits = match(digits, '^0*([0-9].*)$')
  return sign == '-' and digits ~= '0', digits
end

-- Compare digit strings of equal length, 15 digits at a time (exact as doubles).
local function compare_digits(a, b)
  for i = 1, #a, 15 do
    local x, y = tonumber(sub(a, i, i + 14)), tonumber(sub(b, i, i + 14))
    if x ~= y then
      return x < y and -1 or 1
    end
  end
  return 0
end

local function compare_magnitude(a, b)
  if #a ~= #b then
    return #a < #b and -1 or 1
  end
  return compare_digits(a, b)
end

local INT64_MAX, INT64_MIN_MAGNITUDE = '9223372036854775807', '9223372036854775808'

-- Go's strconv.ParseInt(text, 10, 64) as (negative, digits); nil where it fails.
local function go_int64(text)
  local negative, digits = canonical(text)
  if not digits then
    return nil
  end
  if compare_magnitude(digits, negative and INT64_MIN_MAGNITUDE or INT64_MAX) > 0 then
    return nil
  end
  return negative, digits
end

-- Written at or before the pod's last start (scoring.values.is_stale).
local function is_stale(pod, timestamp)
  local start = started[pod]
  if not start then
    return false
  end
  if #timestamp <= 15 and match(timestamp, '^[0-9]+$') then
    -- Exact as a double; comparing with the rounded start keeps the order exact too.
    return tonumber(timestamp) <= start
  end
  local negative, digits = go_int64(timestamp)
  if not digits then
    return false
  end
  local start_negative, start_digits = canonical(started_text[pod])
  if negative ~= start_negative then
    return negative
  end
  local order = compare_magnitude(digits, start_digits)
  if negative then
    return order >= 0
  end
  return order <= 0
end

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

-- Legacy format: the spans of the pod's first k blocks held in each of its media, by its
-- residency ZSETs, appended to the reply.
local function add_residency(reply, pod, k)
  local held = redis.call('SMEMBERS', media_prefix .. pod)
  reply[#reply + 1] = #held
  local blocks = block_members()
  for _, medium in ipairs(held) do
    local key = res_prefix .. pod .. res_between .. medium
    local spans, first = {}, nil
    for chunk = 1, k, HMGET_CHUNK do
      local last_b = math.min(k, chunk + HMGET_CHUNK - 1)
      local scores = redis.call('ZMSCORE', key, unpack(blocks, chunk, last_b))
      for j = 1, last_b - chunk + 1 do
        local b = chunk + j - 1
        if scores[j] then
          first = first or b
        elseif first then
          spans[#spans + 1], spans[#spans + 2], first = first - 1, b - first, nil
        end
      end
    end
    if first then
      spans[#spans + 1], spans[#spans + 2] = first - 1, k + 1 - first
    end
    reply[#reply + 1] = medium
    reply[#reply + 1] = #spans / 2
    for _, n in ipairs(spans) do
      reply[#reply + 1] = n
    end
  end
end

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

-- Per state pod (ARGV from `pods_at`), the spans {start, length, ...} (1-based) of the request's
-- blocks whose group (`spec_key` -> `groups_key`) holds an unexpired entry, up to the pod's reach
-- (scoring.route_state.speculative_positions is the same rule in Python). A pod is alive at a
-- block within its matched run, or past it while every block since the run's end has an entry;
-- the lookups stop at the first block where no pod is alive. Fields are fetched in growing
-- chunks (the longest run first); a group is read where the block's group changes.
local function speculative_spans(now, n_state, pods_at, spec_key, groups_key)
  local spans, index_of = {}, {}
  for i = 1, n_state do
    spans[i], index_of[ARGV[pods_at + i - 1]] = {}, i
  end
  if n_blocks == 0 or redis.call('EXISTS', spec_key) == 0 then
    return spans
  end
  local ending, in_run, longest = {}, 0, 0 -- ending[r]: the pods whose run is r blocks
  for i = 1, n_state do
    local run = matched[ARGV[pods_at + i - 1]] or 0
    ending[run] = ending[run] or {}
    ending[run][#ending[run] + 1] = i
    if run > 0 then
      in_run = in_run + 1
    end
    longest = math.max(longest, run)
  end
  local members = block_members()
  local values, fetched = {}, 0
  local open, dead, past_run, extending = {}, {}, {}, 0
  local current, previous = {}, nil -- current: the alive pods with an entry at the block
  local function close(i, last)
    local pod_spans = spans[i]
    pod_spans[#pod_spans + 1], pod_spans[#pod_spans + 2] = open[i], last - open[i] + 1
    open[i] = nil
  end
  local b = 0
  while b < n_blocks do
    b = b + 1
    if b > fetched then
      local upto = math.min(n_blocks, math.max(longest + 16, 2 * fetched))
      for first_b = fetched + 1, upto, HMGET_CHUNK do
        local last_b = math.min(upto, first_b + HMGET_CHUNK - 1)
        local chunk = redis.call('HMGET', spec_key, unpack(members, first_b, last_b))
        for j = 1, last_b - first_b + 1 do
          values[first_b + j - 1] = chunk[j]
        end
      end
      fetched = upto
    end
    local value = values[b]
    if value ~= previous then
      previous = value
      local here = {}
      local content = value and redis.call('HGET', groups_key, value)
      if content then
        local entries = cjson.decode(content)
        for j = 1, #entries, 2 do
          local i = index_of[entries[j]]
          if i and not dead[i] and tonumber(entries[j + 1]) > now then
            here[i] = true
          end
        end
      end
      for i in pairs(current) do
        if not here[i] then
          close(i, b - 1)
          if past_run[i] then
            dead[i], extending = true, extending - 1
          end
        end
      end
      for i in pairs(here) do
        open[i] = open[i] or b
      end
      current = here
    end
    for _, i in ipairs(ending[b - 1] or {}) do
      if b > 1 then
        in_run = in_run - 1
      end
      if current[i] then
        past_run[i], extending = true, extending + 1
      else
        dead[i] = true
      end
    end
    if in_run == 0 and extending == 0 then
      break
    end
  end
  for i in pairs(current) do
    close(i, b)
  end
  return spans
end

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
    local queue = redis.call('HMGET', KEYS[key + 1], 'busy_until_ms', 'prefill_ms')
    reply[#reply + 1] = queue[1]
    reply[#reply + 1] = queue[2]
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
