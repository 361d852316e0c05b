-- Hand a held lock straight to another owner in the same process, with a fresh lease
-- (and fencing token, for an owner that wants it with the lock): the local handoff
-- that keeps a busy lock inside one process without a round of release, wake-up and
-- claim. Needs clock.lua, grant.lua and queue.lua.
--
-- KEYS[1]  the lock key.   KEYS[2]  the wait queue.
-- KEYS[3]  its fencing counter, for a pass with a token; absent for one without (the
--          new holder asks for its token when it needs it: fence.lua), which reads
--          neither the counter nor the clock.
-- ARGV     token, next_token, ttl_ms, ahead: unless '1', never pass while anyone
--          waits in the queue (they come first: the caller releases instead); with
--          '1' the caller passes ahead of them for a bounded time, but never ahead of
--          a fair waiter at the head of the line (FIFO is its promise).
--
-- Returns the new fence (1 from a pass without one), or 0 if not passed. Retrying a
-- pass whose reply was lost is safe: it finds next_token holding.

local lock, queue, counter = KEYS[1], KEYS[2], KEYS[3] or false
local token, next_token, ttl, ahead = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local function pass_on()
  if not counter then
    grant(lock, false, next_token, ttl)
    return 1
  end
  return grant(lock, counter, next_token, ttl, before_grant(counter))
end

local holder = redis.call('GET', lock)
if holder == next_token then
  return pass_on()
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
return pass_on()
