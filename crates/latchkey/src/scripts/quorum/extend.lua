-- Extend a quorum lock on one node, or take it back on a node that lost it. Needs
-- clock.lua and grant.lua.
--
-- A node that restarted empty (or whose copy of the lease ran out while the holder
-- was away from it) no longer holds the lock. The holder extends on the others; if
-- this node is free it takes the lock back here, with its fencing token, so that
-- restarts do not wear the majority down over a long hold. Only nodes that still
-- held the lock (reply 1) count towards the majority an extend needs: a node taken
-- back (reply 2) adds to the hold, it does not prove it.
--
-- KEYS[1]  the lock key.   KEYS[2]  the node's fencing counter.
-- ARGV     token, ttl_ms, fence, memory_ms (see take.lua), take_back: '1' to take a
--          free node back (only while the lock is surely the caller's), else '0'.
--
-- Returns 1 when the lease was reset, 2 when the lock was free and is taken back,
-- 0 when it is not the caller's here (someone else's, or free and not taken back).

local lock, fence_key = KEYS[1], KEYS[2]
local token, ttl, fence, memory = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local take_back = ARGV[5] == '1'

local holder = redis.call('GET', lock)
if (holder and holder ~= token) or (not holder and not take_back) then
  return 0
end
-- Read before the first write: a counter that is not a number raises here.
local counter = math.max(last_fence(fence_key), fence)
if holder then
  redis.call('PEXPIRE', lock, ttl)
else
  redis.call('SET', lock, token, 'PX', ttl)
end
-- The counter never falls below the holder's token and outlives the lock it fences.
redis.call('SET', fence_key, string.format('%d', counter), 'PX', memory)
return holder and 1 or 2
