--[[
The arguments every index command starts with (writer.py `_pod_args`), and the globals the
scripts use, read once: in the loops, a local costs one VM step where a global costs a lookup.
KEYS: refcounts, pod media, pod ranks, retired set, pod models, pod kinds.
ARGV: pod, key prefixes (matrix, mapping, engine blocks, residency, stream status, and the
engine blocks as builds before issue 35 kept them: live and retired), the legacy retired set,
the number of engine-block buckets of a stream generation, model, kind, the value format ("tiered" or "legacy", compatibility.md 2.7), whether
kthena's sidecar mapping keys are kept ("on" or "off", compatibility.md 2.3), the media
preference (fallback position, count, names); `p` is the index of the command's own first
argument.
]]

local ARGV, tonumber, pairs, ipairs, unpack = ARGV, tonumber, pairs, ipairs, unpack
local find, sub, lower, match, byte = string.find, string.sub, string.lower, string.match, string.byte
local call = redis.call
local RC, MEDIA, RANKS, RETIRED, PODS, KINDS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local pod = ARGV[1]
local MATRIX, MAPPING, EB, RES, STATUS = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local LEGACY_EB, LEGACY_RETIRED_EB, LEGACY_RETIRED = ARGV[7], ARGV[8], ARGV[9]
local BUCKETS = tonumber(ARGV[10])
local model, kind = ARGV[11], ARGV[12]
-- Legacy values are the timestamp alone, for kthena main; the media stay in the residency.
local legacy = ARGV[13] == 'legacy'
-- kthena's router never reads the mapping keys, only its sidecar does: off, the writer neither
-- sets nor deletes them (garbage collection and purges still remove those left).
local mapping_keys = ARGV[14] == 'on'

-- Media preference: listed media rank 0, 1, ...; every other medium (and none) ranks just
-- before the listed one at the fallback position. Equal ranks are ordered by name.
local fallback = tonumber(ARGV[15]) - 0.5
local top_listed = fallback > 0 -- the first listed medium beats every other one
local n_pref = tonumber(ARGV[16])
local pref = {}
for i = 1, n_pref do
  pref[ARGV[16 + i]] = i - 1
end
local p = 17 + n_pref
