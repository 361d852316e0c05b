-- Release a lock, handing it to the oldest live waiter, and (or only) leave its
-- queue. Needs clock.lua and queue.lua.
--
-- KEYS[1]  the lock key.   KEYS[2]  the wait queue.   KEYS[3]  the waiters' leases.
-- KEYS[4]  the pub/sub channel on which a waiter hears "you're next" (the SHA-1 of
--          its token, so the token itself never crosses the channel).
-- ARGV     token, leaving: '1' = the caller may be queued, leave the queue first.
--
-- Returns 1 if the lock was ours (and is now handed over, or free), else 0.

local lock, queue, leases, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, leaving = ARGV[1], ARGV[2]

local holder = redis.call('GET', lock)
-- Nobody ever queued (the common case): no queue work, and EXISTS cannot fail on a
-- key of another type the way the queue commands would.
if leaving ~= '1' and holder == token and redis.call('EXISTS', queue) == 0 then
  redis.call('DEL', lock)
  return 1
end
check_queue(queue, leases)
if leaving == '1' then
  leave_queue(queue, leases, 'f' .. token)
  leave_queue(queue, leases, 'p' .. token)
end
if holder ~= token then
  return 0
end
local waiter, lease_left = next_live_waiter(queue, leases)
if not waiter then
  redis.call('DEL', lock)
  return 1
end
leave_queue(queue, leases, waiter)
-- The lock passes straight to the oldest live waiter, plain or fair, for as long as
-- its waiter lease still runs; it claims the lock with its full lease when it hears
-- of it. Freeing the lock instead would let a newcomer (often the releaser, back for
-- more) take it first every time, and the waiter would starve.
local waiter_token = string.sub(waiter, 2)
redis.call('SET', lock, waiter_token, 'PX', lease_left)
-- pcall: the release has happened; an ACL user without rights on the channel must
-- not turn it into an error (the waiter's timer then finds the lock instead).
redis.pcall('PUBLISH', channel, redis.sha1hex(waiter_token))
return 1
