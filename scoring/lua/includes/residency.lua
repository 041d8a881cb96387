-- The legacy value format's media (compatibility.md 2.7), from kvadmin's residency. Reads the
-- including script's `media_prefix`, `res_prefix`, `res_between`, `block_members` and
-- HMGET_CHUNK.

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
