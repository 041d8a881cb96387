-- The speculative entries of the routing state (scoring.route_state). Reads the including
-- script's `n_blocks`, `matched`, `block_members` and HMGET_CHUNK.

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
