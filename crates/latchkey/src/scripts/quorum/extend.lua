-- Extend a quorum lock on one node, or take it back on a node that lost it. Needs
-- clock.lua, grant.lua and ended.lua.
--
-- A node that restarted empty (or whose copy of the lease ran out while the holder
-- was away from it) no longer holds the lock. The holder extends where it still
-- holds it (take_back '0'); only once a majority said so, while the lock is surely
-- still its own, does it ask the free nodes again with take_back '1', to take the
-- lock back there with its fencing token, so that restarts do not wear the
-- majority down over a long hold. A free node never decides alone: a lock broken on
-- every node (force_release) is lost, not taken back. A value released here is
-- never taken back (see ended.lua).
--
-- KEYS[1]  the lock key.   KEYS[2]  the node's fencing counter.
-- KEYS[3]  the values released lately (see ended.lua).
-- ARGV     token, ttl_ms, fence (0: none yet, fencing on demand), memory_ms (see
--          take.lua), take_back: '1' to take a free node back, else '0'.
--
-- Returns 1 when the lease was reset, 2 when the lock was free and is taken back,
-- 3 when it is free and may be taken back, 0 when it is not the caller's here
-- (someone else's, or released).

local lock, fence_key, ended = KEYS[1], KEYS[2], KEYS[3]
local token, ttl, fence, memory = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local take_back = ARGV[5] == '1'

local holder = redis.call('GET', lock)
if holder and holder ~= token then
  return 0
end
if not holder and has_ended(ended, token) then
  return 0
end
if not holder and not take_back then
  return 3
end
-- Read before the first write: a counter that is not a number raises here.
local counter = math.max(last_fence(fence_key), fence)
if holder then
  redis.call('PEXPIRE', lock, ttl)
else
  redis.call('SET', lock, token, 'PX', ttl)
end
-- The counter never falls below the holder's token and outlives the lock it fences.
-- A lock fenced on demand that has no token yet (fence 0) on a node with no counter
-- creates none.
if counter > 0 then
  redis.call('SET', fence_key, string.format('%d', counter), 'PX', memory)
end
return holder and 1 or 2
