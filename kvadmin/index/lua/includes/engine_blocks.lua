--- @include "pod_args"
--- @include "media_list"

-- A stream's engine blocks are spread over BUCKETS (1000) small hashes per generation, which
-- Redis keeps as listpacks (docs/capacity.md section 1); kvadmin/index/engine_blocks.py reads
-- them the same way. An engine hash longer than three characters that ends in three decimal
-- digits (vLLM's and SGLang's integers) lives in the bucket those digits name, under the
-- rest of its text: the 17 digits left of a 20-digit hash fit Redis's 8-byte integer
-- encoding, 12 bytes less than the text. Any other lives whole, after a ':' (which no engine
-- hash text holds), in the bucket of its last three bytes read as digits.
-- Buckets are named by three digits, "000" to "999" (bucket_name).
-- Returns the bucket's name and the field: for an integer, two substrings of the hash (no
-- number is parsed or printed, which costs Lua more than the rest of the lookup).
local function slot(eh)
  local n = #eh
  local a, b, c = 48, 48, 48
  if n >= 3 then
    a, b, c = byte(eh, n - 2, n)
    if n > 3 and a >= 48 and a <= 57 and b >= 48 and b <= 57 and c >= 48 and c <= 57 then
      return sub(eh, -3), sub(eh, 1, -4)
    end
  elseif n == 2 then
    b, c = byte(eh, 1, 2)
  elseif n == 1 then
    c = byte(eh)
  end
  return string.format('%03d', (a * 100 + b * 10 + c - 5328) % BUCKETS), ':' .. eh
end

-- The name of bucket number `i` (0 to BUCKETS - 1).
local function bucket_name(i)
  return string.format('%03d', i)
end

-- The engine hash of field `f` of the bucket named `bucket` (the inverse of slot).
local function engine_hash(f, bucket)
  if byte(f, 1) == 58 then
    return sub(f, 2)
  end
  return f .. bucket
end

-- The prefix of the bucket keys of one generation of stream `name`.
local function generation_prefix(name, generation)
  return EB .. name .. '|' .. generation .. ':'
end

-- The prefix of the bucket keys of the live generation of stream `name` (its status's
-- `generation`, which a clear or a stream purge moves on).
local function live_prefix(name)
  return generation_prefix(name, call('HGET', STATUS .. name, 'generation') or '0')
end

-- The live generation of the stream the script works on (nil for none): its own engine
-- blocks are not "elsewhere".
local own_prefix

-- The stream holds the engine block of field `f` of bucket key `eb` (= std) in the media of
-- `media_text` (see media_list.lua's entry).
local function write(eb, f, std, media_text)
  call('HSET', eb, f, entry(std, media_text))
end

-- The live generations of the pod's streams (data-parallel ranks), read once per call.
local stream_ebs
-- What a live stream of the pod other than the script's own holds as engine block `eh` (its
-- engine-blocks value), nil when none does. A pod with one rank pays nothing, a DP-n pod at
-- most n - 1 HGETs. It resolves another rank's placeholders (engine hash -> content is a
-- function of the engine), and it is the mapping key's reference count by rank, read from
-- the streams' own engine blocks rather than kept in a counter that could drift.
local function held_elsewhere(eh)
  if not stream_ebs then
    stream_ebs = {}
    for _, name in ipairs(call('SMEMBERS', RANKS)) do
      local prefix = live_prefix(name)
      if prefix ~= own_prefix then
        stream_ebs[#stream_ebs + 1] = prefix
      end
    end
  end
  if #stream_ebs == 0 then
    return nil
  end
  local bucket, f = slot(eh)
  for _, other in ipairs(stream_ebs) do
    local v = call('HGET', other .. bucket, f)
    if v then
      return v
    end
  end
  return nil
end

-- Whether dropping a block deletes its mapping key: under the setting (pod_args.lua); garbage
-- collection sets it to remove the keys left from when the setting was on.
local forget_mappings = mapping_keys

-- kthena's mapping key of `eh` is per pod: it goes when the last stream holding `eh` lets it go.
local function forget_mapping(eh)
  if not held_elsewhere(eh) then
    call('DEL', MAPPING .. eh)
  end
end

-- The stream no longer holds engine block `eh` (field `f` of `eb`): the entry goes, and its
-- mapping key unless another rank still holds the block.
local function drop(eb, f, eh)
  call('HDEL', eb, f)
  if forget_mappings then
    forget_mapping(eh)
  end
end

-- The stream still holds engine block `eh` (field `f` of `eb`, = std) in the media of `list`;
-- with none left it drops the block. The caller releases the media that left the list.
local function keep(eb, f, eh, std, list)
  if #list == 0 then
    drop(eb, f, eh)
  else
    write(eb, f, std, table.concat(list, ','))
  end
end

-- Builds before issue 35 kept a stream's engine blocks in one hash per stream. Every command
-- but the upgrade (upgrade-6.lua) refuses a pod still holding any in that layout, before it
-- writes anything: the writer upgrades the pod and runs the command again.
local function refuse_legacy()
  local old = { LEGACY_RETIRED }
  for _, name in ipairs(call('SMEMBERS', RANKS)) do
    old[#old + 1] = LEGACY_EB .. name
  end
  if call('EXISTS', unpack(old)) > 0 then
    return redis.error_reply('LEGACY_LAYOUT ' .. pod .. ' keeps engine blocks as before issue 35')
  end
end
