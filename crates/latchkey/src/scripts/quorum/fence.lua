-- Write a quorum lock's fencing token back to one node: the second round of the
-- quorum grant (see docs/quorum-fencing.md). Needs clock.lua and grant.lua.
--
-- The counter is raised to the token only while this node still holds the lock for
-- the caller: a node that lost the lock since (its lease ran out, it restarted
-- empty) must not count towards the majority that carries the token.
--
-- KEYS[1]  the lock key.   KEYS[2]  the node's fencing counter.
-- ARGV     token, fence, memory_ms (see take.lua).
--
-- Returns 1 when the node holds the lock for the caller and its counter is at least
-- the fence now, 0 when the lock is not the caller's here.

local lock, fence_key = KEYS[1], KEYS[2]
local token, fence, memory = ARGV[1], tonumber(ARGV[2]), ARGV[3]

if redis.call('GET', lock) ~= token then
  return 0
end
if last_fence(fence_key) < fence then
  redis.call('SET', fence_key, string.format('%d', fence), 'PX', memory)
end
return 1
