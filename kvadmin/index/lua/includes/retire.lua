--- @include "engine_blocks"

-- Retire the live generation of a stream's engine blocks in O(1): the stream moves on to a new
-- generation, and the old one keeps its references until drained (drain-6.lua, from its first
-- bucket). Returns the new generation's key prefix.
local function retire(name)
  local status = STATUS .. name
  call('HSET', RETIRED, name .. '|' .. (call('HGET', status, 'generation') or '0'), 0)
  local generation
  repeat
    generation = call('HINCRBY', status, 'generation', 1)
  until call('HEXISTS', RETIRED, name .. '|' .. generation) == 0
  stream_ebs = nil
  return generation_prefix(name, generation)
end
