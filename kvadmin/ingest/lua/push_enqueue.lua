--[[
Queue one pushed batch under the pod's next seq.

Input:
  KEYS[1]     the pod's push seq, KEYS[2] its queue, KEYS[3] the push stream's status
  ARGV[1]     the engine registration's id, ARGV[2] the payload
Output:
  { seq, 1 when the push stream had no state before this push (else 0) }
]]
local seq = redis.call('INCR', KEYS[1])
redis.call('RPUSH', KEYS[2], seq .. ':' .. ARGV[1] .. '|' .. ARGV[2])
return {seq, redis.call('HSETNX', KEYS[3], 'first_seq', seq)}
