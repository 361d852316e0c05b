-- Propose a fencing token for a quorum lock granted without one (fencing on
-- demand): the first round of the token, run when the holder first asks for it.
-- Needs clock.lua, grant.lua and proposal.lua.
--
-- A node proposes only while it holds the lock for the caller, and says how much
-- longer it will: the holder hands the token out only while a majority of the nodes
-- that carry it surely still hold the lock for it (docs/quorum-fencing.md).
--
-- KEYS[1]  the lock key.   KEYS[2]  the node's fencing counter.
-- ARGV     token, clock_step_us, memory_ms (see take.lua).
--
-- Returns {1, proposal, pttl} when the node holds the lock for the caller (pttl -1:
-- made endless by hand), {0, 0, 0} when the lock is not the caller's here.

local lock, fence_key = KEYS[1], KEYS[2]
local token, step, memory = ARGV[1], tonumber(ARGV[2]), ARGV[3]

if redis.call('GET', lock) ~= token then
  return {0, 0, 0}
end
local proposal = next_proposal(fence_key, step)
store_proposal(fence_key, proposal, memory)
return {1, proposal, redis.call('PTTL', lock)}
