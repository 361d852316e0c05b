-- Take a lock on one node of a quorum, and with a fenced request propose a fencing
-- token for it. Needs clock.lua, grant.lua, ended.lua and proposal.lua.
--
-- A quorum has no wait queue (a FIFO line needs one authority), so this is the
-- plain `SET NX` of the lock, plus the node's fencing counter when the caller
-- fences on grant. The holder takes the largest proposal of the nodes that granted
-- it, and writes it back (fence.lua) on a majority before using it;
-- docs/quorum-fencing.md says why that is enough. A holder that fences on demand
-- proposes later, while it holds the lock (propose.lua).
--
-- KEYS[1]  the lock key: exactly the owner token with a PX expiry.
-- KEYS[2]  the node's fencing counter.
-- KEYS[3]  the values released lately (see ended.lua): a take that arrives after
--          its attempt was undone sets nothing.
-- ARGV     token, ttl_ms, clock_step_us, memory_ms, propose ('1' or '0').
--          clock_step_us: see next_proposal (proposal.lua).
--          memory_ms: how long the counter outlives the last grant that touched it.
--
-- Returns {1, proposal, false} when the lock is ours here (proposal 0 when not
-- asked for), {0, pttl, holder} when someone else holds it, {0, -2, false} when
-- this attempt was undone already.

local lock, fence_key, ended = KEYS[1], KEYS[2], KEYS[3]
local token, ttl, step, memory = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]

-- GET first: it raises WRONGTYPE before anything is written, and it finds a lock an
-- earlier request with this token set (its reply lost).
local holder = redis.call('GET', lock)
if holder and holder ~= token then
  return {0, redis.call('PTTL', lock), holder}
end
if not holder and has_ended(ended, token) then
  return {0, -2, false}
end
if ARGV[5] ~= '1' then
  redis.call('SET', lock, token, 'PX', ttl)
  return {1, 0, false}
end
local proposal = next_proposal(fence_key, step)
redis.call('SET', lock, token, 'PX', ttl)
store_proposal(fence_key, proposal, memory)
return {1, proposal, false}
