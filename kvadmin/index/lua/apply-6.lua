--[[
Apply decoded batches of one stream to the index, exactly once per seq. writer.py builds the
arguments and documents the data layout. Standardized hashes stay strings here: Lua numbers are
doubles and would round 63-bit hashes.

Input:
  KEYS[1..6]  refcounts, pod media, pod ranks, retired generations, pod models, pod kinds
  ARGV        the pod arguments (includes/pod_args.lua), then
    stream name, now (residency score: unix microseconds), mapping TTL (used with the mapping
    keys on), the most distinct unknown tags a stream's status keeps, after (the last seq of
    the stream's call sent before this one, "" for none), then per batch: seq, publish time
    ("" when unknown), payload digest ("" when unknown), body length, counters (count, then
    name and amount each), operations (writer.py `_encode`).
Output:
  { retired generations of the pod, then per batch: applied (1/0) and the six counts
    blocks_stored, blocks_removed, clears, unresolved_placeholders, unknown_removals,
    std_conflicts }
  Error "OUT_OF_ORDER ..." when the call sent before this one is not applied; "MODEL_CHANGED
  {model}" when the pod still has entries of another model, "LEGACY_LAYOUT ..." while it keeps
  engine blocks as before issue 35 (nothing written).

Each operation calls Redis directly: 6.4 commands per stored block on the benchmark's mix with
the mapping keys on; off, a store with tokens and a block's last removal make one call fewer.
An operation finds its engine block's bucket key once (includes/engine_blocks.lua).
Tried and measured slower: caching the stream's engine blocks and the pod's residency in Lua
tables (read with HMGET/ZMSCORE up front, written back with one variadic command per key) cut
that to 2 commands per block, but Redis spent 25-30% more time per block: in Redis's Lua, a new
table entry costs about as much as the redis.call it saves.
]]
--- @include "media_list"
--- @include "release"
--- @include "hold"
--- @include "retire"
--- @include "set_value"
--- @include "pod_media"

-- `after`: the last seq of the stream's call sent before this one and not yet answered
-- ("" when none). Should that call have failed, this one must fail too: applying it would
-- put its seqs above batches that were never applied, and refuse them when they come again.
local rank, ttl, max_tags, after = ARGV[p], ARGV[p + 2], tonumber(ARGV[p + 3]), ARGV[p + 4]
now = ARGV[p + 1]
now_seconds = seconds(now)
p = p + 5
local refused = refuse_legacy()
if refused then
  return refused
end
local status = STATUS .. rank
local state = call('HMGET', status, 'last_seq', 'generation')
local last = tonumber(state[1] or '-1')
own_prefix = generation_prefix(rank, state[2] or '0')
if after ~= '' and last < tonumber(after) then
  return redis.error_reply('OUT_OF_ORDER the stream is applied through seq ' .. last
    .. ', this call follows seq ' .. after)
end
local out = { 0 }
--- @include "counter_totals"
local applied = 0
local last_ts -- the publish time of the last applied batch that has one
local last_digest -- the payload digest of the last applied batch ('' when unknown)
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
  local bucket, f = slot(eh)
  local eb = own_prefix .. bucket
  if call('HSETNX', eb, f, entry(std, m)) == 1 then
    add_holder(std, m)
  else
    local old_std, media_text = parse(call('HGET', eb, f))
    if old_std ~= std then
      for _, x in ipairs(split(media_text)) do
        release(old_std, x)
      end
      media_text = nil
      c[6] = c[6] + 1
    end
    hold(eb, f, std, media_text, m, true)
  end
  if mapping_keys then
    -- SETEX, not SET EX: one argument less to convert, 2% of a store's Redis work.
    call('SETEX', MAPPING .. eh, ttl, std)
  end
  c[1] = c[1] + 1
end

-- 'P': a placeholder, the stream now holds `eh` in `m` too.
local function place(eh, m)
  local bucket, f = slot(eh)
  local eb = own_prefix .. bucket
  local old = call('HGET', eb, f)
  if old then
    local std, media_text = parse(old)
    hold(eb, f, std, media_text, m, false)
    c[1] = c[1] + 1
  else
    -- Another rank of the pod may have stored it: engine hash -> content is a function of
    -- the engine, and the placeholder says this rank holds it.
    local other = held_elsewhere(eh)
    if other then
      hold(eb, f, (parse(other)), nil, m, false)
      c[1] = c[1] + 1
    else
      c[4] = c[4] + 1
    end
  end
end

-- 'R': the stream no longer holds `eh` in `m`.
local function remove(eh, m)
  local bucket, f = slot(eh)
  local eb = own_prefix .. bucket
  local old = call('HGET', eb, f)
  if not old then
    c[5] = c[5] + 1
    return
  end
  local std, media_text = parse(old)
  local x
  if only(media_text, m) then
    x = media_text
    drop(eb, f, eh)
  else
    local list = split(media_text)
    local at = removal_at(list, m)
    if not at then
      c[5] = c[5] + 1
      return
    end
    x = table.remove(list, at)
    keep(eb, f, eh, std, list)
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
  local bucket, f = slot(eh)
  local eb = own_prefix .. bucket
  local old = call('HGET', eb, f)
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
    write(eb, f, std, to)
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
      keep(eb, f, eh, std, list)
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
  local seq, ts, digest = ARGV[p], ARGV[p + 1], ARGV[p + 2]
  local body_end = p + 3 + tonumber(ARGV[p + 3])
  p = p + 4
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
    last_digest = digest
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
        own_prefix = retire(rank)
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
  -- With last_seq, never after it: a reader that takes the stream over compares the
  -- engine's replay of last_seq with this digest (reader.py `_continues`).
  if last_digest ~= '' then
    call('HSET', status, 'last_digest', last_digest)
  else
    call('HDEL', status, 'last_digest')
  end
  call('HINCRBY', status, 'batches', applied)
  add_totals(status, max_tags)
end
settle_media()
out[1] = call('HLEN', RETIRED)
return out
