--[[
kvadmin's index writer, one script with six commands (ARGV[1]):
  apply   apply decoded batches of one stream, exactly once per seq
  retire  move a stream's engine blocks aside (a stream purge)
  drain   release up to N retired engine blocks
  purge   delete up to N of a pod's entries, no reference counting
  expire  garbage collection: drop the media of up to about N of a stream's engine blocks
          whose residency is older than a cutoff (an HSCAN step)
  sweep   garbage collection: release up to N residency entries older than a cutoff that no
          engine block holds any more
writer.py builds the arguments and documents the data layout. Standardized hashes stay strings
here: Lua numbers are doubles and would round 63-bit hashes.

Each operation calls Redis directly: 6.4 commands per stored block on the benchmark's mix.
Tried and measured slower: caching the stream's engine blocks and the pod's residency in Lua
tables (read with HMGET/ZMSCORE up front, written back with one variadic command per key) cut
that to 2 commands per block, but Redis spent 25-30% more time per block: in Redis's Lua, a new
table entry costs about as much as the redis.call it saves.

KEYS: refcounts, pod media, pod ranks, retired set, pod models, pod kinds.
ARGV: command, pod, then key prefixes (matrix, mapping, engine blocks, residency, stream status,
retired blocks), model, kind, the media preference (fallback position, count, names), then the
command's own arguments.
]]
-- Globals read once: in the loops, a local costs one VM step where a global costs a lookup.
local ARGV, tonumber, pairs, ipairs, unpack = ARGV, tonumber, pairs, ipairs, unpack
local find, sub, lower, match = string.find, string.sub, string.lower, string.match
local call = redis.call
local RC, MEDIA, RANKS, RETIRED, PODS, KINDS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local cmd, pod = ARGV[1], ARGV[2]
local MATRIX, MAPPING, EB, RES, STATUS, RETIRED_EB =
  ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local model, kind = ARGV[9], ARGV[10]

-- Media preference: listed media rank 0, 1, ...; every other medium (and none) ranks just
-- before the listed one at the fallback position. Equal ranks are ordered by name.
local fallback = tonumber(ARGV[11]) - 0.5
local top_listed = fallback > 0 -- the first listed medium beats every other one
local n_pref = tonumber(ARGV[12])
local pref = {}
for i = 1, n_pref do
  pref[ARGV[12 + i]] = i - 1
end
local p = 13 + n_pref

local medium_ranks = {}
local function rank_of(m)
  local r = medium_ranks[m]
  if r == nil then
    r = pref[match(lower(m), '^%s*(.-)%s*$')] or fallback
    medium_ranks[m] = r
  end
  return r
end

local function better(a, b)
  local ra, rb = rank_of(a), rank_of(b)
  if ra ~= rb then
    return ra < rb
  end
  return a < b
end

local function value(ts, m)
  if m == '' then
    return ts
  end
  return ts .. '|' .. m
end

-- Whole seconds of a residency score (integer microseconds) for a matrix value.
local function seconds(score)
  local digits = #score - 6
  if digits < 1 then
    return '0'
  end
  return sub(score, 1, digits)
end

local function medium_of(v)
  local sep = find(v, '|', 1, true)
  if sep then
    return sub(v, sep + 1)
  end
  return ''
end

-- A media list is never empty: "" is the one medium "" (no medium), "GPU," is GPU and "".
local function split(text)
  local out, start = {}, 1
  while true do
    local comma = find(text, ',', start, true)
    if not comma then
      out[#out + 1] = sub(text, start)
      return out
    end
    out[#out + 1] = sub(text, start, comma - 1)
    start = comma + 1
  end
end

local function index_of(list, m)
  for i, y in ipairs(list) do
    if y == m then
      return i
    end
  end
end

-- The entry of a media list that a removal in `m` takes: `m` itself; a removal without a
-- medium takes the medium-less entry, or else the primary tier (writer.py, decision 2).
local function removal_at(list, m)
  return index_of(list, m) or (m == '' and 1 or nil)
end

-- Whether a removal in `m` takes the one medium of `media_text`, the common case, decided
-- without building the list (a table is costly here: it is garbage right away).
local function only(media_text, m)
  return (media_text == m or m == '') and not find(media_text, ',', 1, true)
end

-- An engine-blocks value "{std}|{media list}": std, media list text.
local function parse(v)
  local sep = find(v, '|', 1, true)
  return sub(v, 1, sep - 1), sub(v, sep + 1)
end

local function has(text, m)
  return find(',' .. text .. ',', ',' .. m .. ',', 1, true) ~= nil
end

local media
local shrunk = {} -- media whose residency lost entries in this call
local function pod_media()
  if not media then
    media = {}
    for _, m in ipairs(call('SMEMBERS', MEDIA)) do
      media[m] = true
    end
  end
  return media
end

-- Whether the pod's refcounts hash exists, looked up once per script call: most pods hold
-- no block twice, and then a release looks nothing up.
local refcounts
local function has_refcounts()
  if refcounts == nil then
    refcounts = call('EXISTS', RC) == 1
  end
  return refcounts
end

-- A medium stays in the pod's media set while its residency has entries; checked once per
-- script call rather than once per removal.
local function settle_media()
  for m in pairs(shrunk) do
    if call('EXISTS', RES .. m) == 0 then
      call('SREM', MEDIA, m)
      if media then
        media[m] = nil
      end
    end
  end
  shrunk = {}
end

-- This call's time: the residency score of its stores (unix microseconds) and its whole
-- seconds, the matrix values' ts.
local now, now_seconds

-- Per-medium strings built once per call instead of once per block.
local res_keys, now_values = {}, {}
local function res_key(m)
  local key = res_keys[m]
  if not key then
    key = RES .. m
    res_keys[m] = key
  end
  return key
end

local function now_value(m)
  local v = now_values[m]
  if not v then
    v = value(now_seconds, m)
    now_values[m] = v
  end
  return v
end

-- The pod stored `std` in `m` now: the matrix value names the best medium the pod holds, with
-- this time. Only a medium below the top one (the first listed, unless unlisted media rank
-- first) reads the current value to know whether a better medium is held.
local function set_value(std, m)
  local key, best, current = MATRIX .. std, m, nil
  if rank_of(m) ~= 0 or not top_listed then
    current = call('HGET', key, pod)
    if current then
      local held = medium_of(current)
      if better(held, m) then
        best = held
      end
    end
  end
  local v = now_value(best)
  if v ~= current then
    call('HSET', key, pod, v)
  end
end

-- The pod holds `std` in `m` (again): refresh the residency score and, unless the caller
-- settles it `later`, the matrix value. Returns true when the pod did not hold `std` in `m`.
local function refresh(std, m, later)
  local added = call('ZADD', res_key(m), now, std) == 1
  if not later then
    set_value(std, m)
  end
  return added
end

-- One holder of (pod, std, x) went away. With none left the pod no longer holds std in x:
-- the residency goes, and when x was the value's medium the next best held one takes over,
-- with the time of its own last store; with no medium left the pod's field goes. `fresh`, when
-- given, is a medium the caller stored std in at `now`. Returns nil while other holders
-- remain, 1 when the pod's matrix field went, 0 otherwise.
local function release(std, x, fresh)
  if has_refcounts() then
    local field = std .. '|' .. x
    local holders = call('HGET', RC, field)
    if holders == '2' then
      call('HDEL', RC, field)
      return nil
    elseif holders then
      call('HINCRBY', RC, field, -1)
      return nil
    end
  end
  call('ZREM', res_key(x), std)
  shrunk[x] = true
  local best, ts
  for y in pairs(pod_media()) do
    if y ~= x then
      local score = y == fresh and now or call('ZSCORE', res_key(y), std)
      if score and (not best or better(y, best)) then
        best, ts = y, score
      end
    end
  end
  local key = MATRIX .. std
  if not best then
    return call('HDEL', key, pod)
  end
  -- Other media remain: the value changes only if it named x, which it surely did when x
  -- is the top medium. (Looking at the other media first saves this read when none remain,
  -- as for a block evicted from CPU after leaving GPU.)
  if rank_of(x) ~= 0 or not top_listed then
    local current = call('HGET', key, pod)
    if current and medium_of(current) ~= x then
      return 0
    end
  end
  call('HSET', key, pod, ts == now and now_value(best) or value(seconds(ts), best))
  return 0
end

-- The stream holds engine block `eh` (= std) in the media of `media_text` (see parse).
local function write(eb, eh, std, media_text)
  call('HSET', eb, eh, std .. '|' .. media_text)
end

-- The engine-blocks hashes of the pod's live streams (data-parallel ranks), read once per call.
local stream_ebs
-- Whether a live stream of the pod other than the one of `eb` holds engine block `eh`. This is
-- the mapping key's reference count by rank, read from the streams' own engine blocks rather
-- than kept in a counter: a pod with one rank pays nothing, a DP-n pod at most n - 1 HEXISTS
-- per dropped block, and the count cannot drift from what the streams hold.
local function held_elsewhere(eh, eb)
  if not stream_ebs then
    stream_ebs = {}
    for _, name in ipairs(call('SMEMBERS', RANKS)) do
      stream_ebs[#stream_ebs + 1] = EB .. name
    end
  end
  for _, other in ipairs(stream_ebs) do
    if other ~= eb and call('HEXISTS', other, eh) == 1 then
      return true
    end
  end
  return false
end

-- kthena's mapping key of `eh` is per pod: it goes when the last stream holding `eh` lets it go.
local function forget_mapping(eh, eb)
  if not held_elsewhere(eh, eb) then
    call('DEL', MAPPING .. eh)
  end
end

-- The stream no longer holds engine block `eh`: the entry goes, and its mapping key unless
-- another rank still holds the block.
local function drop(eb, eh)
  call('HDEL', eb, eh)
  forget_mapping(eh, eb)
end

-- The stream still holds engine block `eh` (= std) in the media of `list`; with none left
-- it drops the block. The caller releases the media that left the list.
local function keep(eb, eh, std, list)
  if #list == 0 then
    drop(eb, eh)
  else
    write(eb, eh, std, table.concat(list, ','))
  end
end

-- One more holder of (pod, std, m). The first one is the residency entry alone; from the
-- second on, the refcount field counts them all.
local function add_holder(std, m, later)
  if refresh(std, m, later) then
    local held = pod_media()
    if not held[m] then
      call('SADD', MEDIA, m)
      held[m] = true
    end
  else
    local field = std .. '|' .. m
    if call('HINCRBY', RC, field, 1) == 1 then
      call('HSET', RC, field, 2)
    end
    refcounts = true
  end
end

-- The stream holds engine block `eh` (= std) in `m`. `media_text` is its current media list,
-- nil for a new entry. Stores with tokens put their medium first (the primary tier, which a
-- removal without a medium means); placeholders append theirs.
local function hold(eb, eh, std, media_text, m, primary)
  if media_text then
    if has(media_text, m) then
      refresh(std, m)
      return
    end
    if primary then
      media_text = m .. ',' .. media_text
    else
      media_text = media_text .. ',' .. m
    end
  else
    media_text = m
  end
  write(eb, eh, std, media_text)
  add_holder(std, m)
end

-- Move a stream's engine blocks aside in O(1); they keep their references until drained.
local function retire(rank)
  local eb = EB .. rank
  if call('EXISTS', eb) == 0 then
    return
  end
  local member, key
  repeat
    member = rank .. '|' .. call('HINCRBY', STATUS .. rank, 'generation', 1)
    key = RETIRED_EB .. member
  until call('EXISTS', key) == 0
  call('RENAME', eb, key)
  call('SADD', RETIRED, member)
end

if cmd == 'apply' then
  -- `after`: the last seq of the stream's call sent before this one and not yet answered
  -- ("" when none). Should that call have failed, this one must fail too: applying it would
  -- put its seqs above batches that were never applied, and refuse them when they come again.
  local rank, ttl, max_tags, after = ARGV[p], ARGV[p + 2], tonumber(ARGV[p + 3]), ARGV[p + 4]
  now = ARGV[p + 1]
  now_seconds = seconds(now)
  p = p + 5
  local eb, status = EB .. rank, STATUS .. rank
  local last = tonumber(call('HGET', status, 'last_seq') or '-1')
  if after ~= '' and last < tonumber(after) then
    return redis.error_reply('OUT_OF_ORDER the stream is applied through seq ' .. last
      .. ', this call follows seq ' .. after)
  end
  local out = { 0 }
  -- Counter totals of the call, and their names in first-seen order: unknown tags are kept
  -- per stream in the order they came (below), so the first ones are the stream's first.
  local totals, order = {}, {}
  local function add_total(name, n)
    local total = totals[name]
    if total == nil then
      order[#order + 1] = name
      total = 0
    end
    totals[name] = total + n
  end
  local applied = 0
  local last_ts -- the publish time of the last applied batch that has one
  local c
  local names = {
    'blocks_stored',
    'blocks_removed',
    'clears',
    'unresolved_placeholders',
    'unknown_removals',
    'std_conflicts',
  }

  -- The operations on one engine block `eh` of the stream; `c` counts for the batch.

  -- 'S': a store with tokens. Engines announce new blocks: one call creates the entry.
  local function store(eh, std, m)
    if call('HSETNX', eb, eh, std .. '|' .. m) == 1 then
      add_holder(std, m)
    else
      local old_std, media_text = parse(call('HGET', eb, eh))
      if old_std ~= std then
        for _, x in ipairs(split(media_text)) do
          release(old_std, x)
        end
        media_text = nil
        c[6] = c[6] + 1
      end
      hold(eb, eh, std, media_text, m, true)
    end
    -- SETEX, not SET EX: one argument less to convert, 2% of a store's Redis work.
    call('SETEX', MAPPING .. eh, ttl, std)
    c[1] = c[1] + 1
  end

  -- 'P': a placeholder, the stream now holds `eh` in `m` too.
  local function place(eh, m)
    local old = call('HGET', eb, eh)
    if old then
      local std, media_text = parse(old)
      hold(eb, eh, std, media_text, m, false)
      c[1] = c[1] + 1
    else
      -- Another rank of the pod may have stored it: engine hash -> content is a function of
      -- the engine, and the placeholder says this rank holds it.
      local std = call('GET', MAPPING .. eh)
      if std then
        hold(eb, eh, std, nil, m, false)
        c[1] = c[1] + 1
      else
        c[4] = c[4] + 1
      end
    end
  end

  -- 'R': the stream no longer holds `eh` in `m`.
  local function remove(eh, m)
    local old = call('HGET', eb, eh)
    if not old then
      c[5] = c[5] + 1
      return
    end
    local std, media_text = parse(old)
    local x
    if only(media_text, m) then
      x = media_text
      drop(eb, eh)
    else
      local list = split(media_text)
      local at = removal_at(list, m)
      if not at then
        c[5] = c[5] + 1
        return
      end
      x = table.remove(list, at)
      keep(eb, eh, std, list)
    end
    release(std, x)
    c[2] = c[2] + 1
  end

  -- 'M': a placeholder in `to`, then the removal of the same block from `from`: vLLM's
  -- offload (the block reaches CPU, then leaves GPU). The result is that of place then
  -- remove, with less work: the engine-blocks entry is read and written once, and when the
  -- block leaves the top medium the placeholder leaves the matrix value to the release,
  -- which settles it from the media left (or, while other holders keep the top medium,
  -- writes it as the placeholder would have).
  local function move(eh, to, from)
    local old = call('HGET', eb, eh)
    if not old then
      place(eh, to)
      remove(eh, from)
      return
    end
    local std, media_text = parse(old)
    local placed, at, x
    if media_text ~= to and only(media_text, from) then
      -- The usual offload: the block's one medium gives way to `to`.
      placed, at, x = true, 1, media_text
      write(eb, eh, std, to)
    else
      local list = split(media_text)
      placed = not index_of(list, to)
      at = removal_at(list, from)
      x = at and list[at]
      if placed then
        list[#list + 1] = to
      end
      if at then
        table.remove(list, at)
      end
      if placed or at then
        keep(eb, eh, std, list)
      end
    end
    local later = x and top_listed and rank_of(x) == 0
    if placed then
      add_holder(std, to, later)
    else
      refresh(std, to, later)
    end
    c[1] = c[1] + 1
    if at then
      if release(std, x, to) == nil and later then
        set_value(std, to)
      end
      c[2] = c[2] + 1
    else
      c[5] = c[5] + 1
    end
  end

  local argc = #ARGV
  while p <= argc do
    local seq, ts, body_end = ARGV[p], ARGV[p + 1], p + 2 + tonumber(ARGV[p + 2])
    p = p + 3
    if tonumber(seq) <= last then
      out[#out + 1] = 0
      for _ = 1, 6 do
        out[#out + 1] = 0
      end
      p = body_end + 1
    else
      if applied == 0 then
        local known = call('HGET', PODS, pod)
        if known ~= model then
          if known and call('EXISTS', MEDIA) == 1 then
            return redis.error_reply('MODEL_CHANGED ' .. known)
          end
          call('HSET', PODS, pod, model)
          call('HSET', KINDS, pod, kind)
        end
        call('SADD', RANKS, rank)
      end
      applied = applied + 1
      last = tonumber(seq)
      if ts ~= '' then
        last_ts = ts
      end
      -- stored, removed, clears, unresolved placeholders, unknown removals, std conflicts
      c = { 0, 0, 0, 0, 0, 0 }
      for _ = 1, tonumber(ARGV[p]) do
        add_total(ARGV[p + 1], tonumber(ARGV[p + 2]))
        p = p + 2
      end
      p = p + 1
      while p <= body_end do
        local op = ARGV[p]
        if op == 'C' then
          retire(rank)
          c[3] = c[3] + 1
          p = p + 1
        else
          local m, n = ARGV[p + 1], tonumber(ARGV[p + 2])
          p = p + 3
          if op == 'S' then
            for _ = 1, n do
              store(ARGV[p], ARGV[p + 1], m)
              p = p + 2
            end
          elseif op == 'M' then
            local from = ARGV[p]
            p = p + 1
            for _ = 1, n do
              move(ARGV[p], m, from)
              p = p + 1
            end
          else
            local each = op == 'P' and place or remove
            for _ = 1, n do
              each(ARGV[p], m)
              p = p + 1
            end
          end
        end
      end
      out[#out + 1] = 1
      for i = 1, 6 do
        out[#out + 1] = c[i]
      end
      for i = 1, 6 do
        add_total(names[i], c[i])
      end
    end
  end
  if applied > 0 then
    if last_ts then
      call('HSET', status, 'last_seq', last, 'last_batch_ts', last_ts)
    else
      call('HSET', status, 'last_seq', last)
    end
    call('HINCRBY', status, 'batches', applied)
    for _, name in ipairs(order) do
      local count = totals[name]
      if count ~= 0 then
        -- Unknown event tags (keys.UNKNOWN_TAG_FIELD_PREFIX) are engine-chosen text: the
        -- stream's status keeps the first `max_tags` distinct ones (their number in
        -- 'unknown_tags'); later ones count in skipped_unknown_tag only.
        if sub(name, 1, 12) ~= 'unknown_tag:' then
          call('HINCRBY', status, name, count)
        elseif call('HEXISTS', status, name) == 1 then
          call('HINCRBY', status, name, count)
        elseif tonumber(call('HGET', status, 'unknown_tags') or '0') < max_tags then
          call('HINCRBY', status, 'unknown_tags', 1)
          call('HINCRBY', status, name, count)
        end
      end
    end
  end
  settle_media()
  out[1] = call('SCARD', RETIRED)
  return out
end

if cmd == 'retire' then
  local rank = ARGV[p]
  retire(rank)
  call('SREM', RANKS, rank)
  return call('SCARD', RETIRED)
end

if cmd == 'drain' then
  local budget = tonumber(ARGV[p])
  for _, member in ipairs(call('SMEMBERS', RETIRED)) do
    local key = RETIRED_EB .. member
    local flat = call('HRANDFIELD', key, budget, 'WITHVALUES')
    local fields = {}
    for i = 1, #flat, 2 do
      local eh, v = flat[i], flat[i + 1]
      local std, media_text = parse(v)
      for _, x in ipairs(split(media_text)) do
        release(std, x)
      end
      forget_mapping(eh, nil)
      fields[#fields + 1] = eh
    end
    if #fields > 0 then
      call('HDEL', key, unpack(fields))
    end
    if call('EXISTS', key) == 0 then
      call('SREM', RETIRED, member)
    end
    budget = budget - #fields
    if budget <= 0 then
      break
    end
  end
  settle_media()
  local left = call('SCARD', RETIRED)
  if left == 0 and call('SCARD', RANKS) == 0 and call('EXISTS', MEDIA) == 0 then
    call('HDEL', PODS, pod)
    call('HDEL', KINDS, pod)
    call('DEL', MEDIA)
  end
  return left
end

if cmd == 'purge' then
  -- Stop when the pod is no longer the one we set out to purge (another purger finished and
  -- new entries arrived since): returns {more, matrix fields removed}.
  if (call('HGET', PODS, pod) or '') ~= model then
    return { 0, 0 }
  end
  local budget = tonumber(ARGV[p])
  local removed = 0
  local function pop(key)
    local fields = call('HRANDFIELD', key, budget)
    if #fields > 0 then
      local mapping = {}
      for i, eh in ipairs(fields) do
        mapping[i] = MAPPING .. eh
      end
      call('DEL', unpack(mapping))
      call('HDEL', key, unpack(fields))
      budget = budget - #fields
    end
    return call('EXISTS', key) == 0
  end
  -- Every engine-blocks hash a set names (live ranks, or retired generations); false when
  -- the budget ran out first.
  local function pop_all(set, prefix)
    for _, member in ipairs(call('SMEMBERS', set)) do
      if not pop(prefix .. member) then
        return false
      end
      call('SREM', set, member)
      if budget <= 0 then
        return false
      end
    end
    return true
  end
  if not (pop_all(RANKS, EB) and pop_all(RETIRED, RETIRED_EB)) then
    return { 1, removed }
  end
  for _, m in ipairs(call('SMEMBERS', MEDIA)) do
    local key = RES .. m
    local stds = call('ZRANGE', key, 0, budget - 1)
    for _, std in ipairs(stds) do
      removed = removed + call('HDEL', MATRIX .. std, pod)
    end
    if #stds > 0 then
      call('ZREMRANGEBYRANK', key, 0, #stds - 1)
    end
    budget = budget - #stds
    if call('EXISTS', key) == 1 then
      return { 1, removed }
    end
    call('SREM', MEDIA, m)
    if budget <= 0 then
      return { 1, removed }
    end
  end
  call('UNLINK', RC)
  call('DEL', MEDIA, RANKS, RETIRED)
  call('HDEL', PODS, pod)
  call('HDEL', KINDS, pod)
  return { 0, removed }
end

-- Garbage collection (gc.py): ownership whose last store is older than a cutoff goes, exactly
-- as if the engine had sent the removals, so refcounts, residency, engine blocks, mapping keys
-- and the matrix value's best medium stay consistent. Both return {progress, residency
-- entries removed, matrix fields removed, engine blocks looked at}.

if cmd == 'expire' then
  -- One HSCAN step over a stream's engine blocks: a medium goes when the pod's residency of
  -- the block there is older than the cutoff (the last store of the block in that medium by
  -- any rank is that old, so every holder of it is). Progress is the next cursor, "0" at the
  -- end. Blocks stored since the cutoff are newer, so the step is safe to interleave.
  local rank, cursor, cutoff, count = ARGV[p], ARGV[p + 1], tonumber(ARGV[p + 2]), ARGV[p + 3]
  local eb = EB .. rank
  local scan = call('HSCAN', eb, cursor, 'COUNT', count)
  local flat = scan[2]
  local owned, fields = 0, 0
  for i = 1, #flat, 2 do
    local eh, v = flat[i], flat[i + 1]
    local std, media_text = parse(v)
    local kept, gone = {}, {}
    for _, x in ipairs(split(media_text)) do
      local score = call('ZSCORE', res_key(x), std)
      if score and tonumber(score) >= cutoff then
        kept[#kept + 1] = x
      else
        gone[#gone + 1] = x
      end
    end
    if #gone > 0 then
      keep(eb, eh, std, kept)
      for _, x in ipairs(gone) do
        local went = release(std, x)
        if went then
          owned = owned + 1
          fields = fields + went
        end
      end
    end
  end
  settle_media()
  return { scan[1], owned, fields, #flat / 2 }
end

if cmd == 'sweep' then
  -- Residency older than the cutoff that survived `expire` has no holder left (a holder
  -- would have been released there): release it as its last holder. Retired engine blocks
  -- still hold references until drained, so nothing happens while any are left (progress
  -- -1: drain first). Progress is 1 while more may be left.
  if call('SCARD', RETIRED) > 0 then
    return { -1, 0, 0, 0 }
  end
  local m, cutoff, count = ARGV[p], ARGV[p + 1], tonumber(ARGV[p + 2])
  local stds = call('ZRANGEBYSCORE', res_key(m), '-inf', '(' .. cutoff, 'LIMIT', 0, count)
  local fields = 0
  for _, std in ipairs(stds) do
    call('HDEL', RC, std .. '|' .. m)
    fields = fields + release(std, m)
  end
  settle_media()
  local more = 0
  if #stds == count then
    more = 1
  end
  return { more, #stds, fields, 0 }
end

return redis.error_reply('unknown command ' .. cmd)
