-- Hand a held lock straight to another owner in the same process, with a fresh lease
-- and fencing token: the local handoff that keeps a busy lock inside one process
-- without a round of release, wake-up and claim. Needs clock.lua, grant.lua and
-- queue.lua.
--
-- KEYS[1]  the lock key.   KEYS[2]  its fencing counter.   KEYS[3]  the wait queue.
-- ARGV     token, next_token, ttl_ms, ahead: unless '1', never pass while anyone
--          waits in the queue (they come first: the caller releases instead); with
--          '1' the caller passes ahead of them for a bounded time, but never ahead of
--          a fair waiter at the head of the line (FIFO is its promise).
--
-- Returns the new fence, or 0 if not passed. Retrying a pass whose reply was lost is
-- safe: it finds next_token holding.

local lock, fence_key, queue = KEYS[1], KEYS[2], KEYS[3]
local token, next_token, ttl, ahead = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local holder = redis.call('GET', lock)
if holder == next_token then
  return grant(lock, fence_key, next_token, ttl, before_grant(fence_key))
end
if holder ~= token then
  return 0
end
if ahead ~= '1' and redis.call('EXISTS', queue) == 1 then
  return 0
end
if ahead == '1' and is_fair(redis.call('ZRANGE', queue, 0, 0)[1] or '') then
  return 0
end
return grant(lock, fence_key, next_token, ttl, before_grant(fence_key))
