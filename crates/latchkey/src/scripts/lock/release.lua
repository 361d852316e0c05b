-- Release a lock, handing it to the oldest live waiter, and (or only) leave its
-- queue. Needs clock.lua, grant.lua and queue.lua.
--
-- KEYS[1]  the lock key.   KEYS[2]  its fencing counter.   KEYS[3]  the wait queue.
-- KEYS[4]  the waiters' leases.
-- KEYS[5]  the pub/sub channel on which a waiter hears "you're next": the message is
--          the SHA-1 of its token (so the token itself never crosses the channel),
--          the fencing token it was granted and when its waiter lease ends (server
--          ms, as this release saw it), joined by ':'.
-- ARGV     token, leaving: '' or, when the caller may be queued, the lock lease it
--          asked for (ms): it leaves the queue first; publish: 'sharded' on a
--          cluster (SPUBLISH: the message stays within the shard of the lock,
--          where its waiters listen with SSUBSCRIBE), else '' (PUBLISH).
--
-- Returns 1 if the lock was ours (and is now handed over, or free), else 0.

local lock, fence_key, queue, leases, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, leaving, sharded = ARGV[1], ARGV[2], ARGV[3] == 'sharded'

local holder = redis.call('GET', lock)
-- Nobody ever queued (the common case): no queue work, and EXISTS cannot fail on a
-- key of another type the way the queue commands would.
if leaving == '' and holder == token and redis.call('EXISTS', queue) == 0 then
  redis.call('DEL', lock)
  return 1
end
if leaving ~= '' then
  -- Leaving writes before the reads below: both keys' types are checked first.
  check_queue(queue, leases)
end
local last, us = before_grant(fence_key)
if leaving ~= '' then
  leave_queue(queue, leases, queue_member('f', leaving, token))
  leave_queue(queue, leases, queue_member('p', leaving, token))
end
if holder ~= token then
  return 0
end
-- Its first reads (ZRANGE of the queue, ZSCORE of the leases) raise WRONGTYPE
-- before anything is written, so a handover needs no type check of its own.
local waiter, lease_left, lease_end = next_live_waiter(queue, leases, math.floor(us / 1000))
if not waiter then
  redis.call('DEL', lock)
  return 1
end
-- The lock passes straight to the oldest live waiter, plain or fair, with a fencing
-- token, for the lease it asked for or what is left of its waiter lease, whichever
-- is shorter (so a waiter that died costs no more than either): it starts as soon
-- as it hears, and extends the lease to its own if it keeps the lock long enough.
-- Freeing the lock instead would let a newcomer (often the releaser, back for more)
-- take it first every time, and the waiter would starve.
local waiter_ttl, waiter_token = member_lease_and_token(waiter)
local ttl = math.min(lease_left, waiter_ttl or lease_left)
local fence = grant(lock, fence_key, waiter_token, ttl, last, us)
leave_queue(queue, leases, waiter)
-- pcall: the release has happened; an ACL user without rights on the channel must
-- not turn it into an error (the waiter's timer then finds the lock instead).
local told = string.format('%s:%d:%d', redis.sha1hex(waiter_token), fence, lease_end)
redis.pcall(sharded and 'SPUBLISH' or 'PUBLISH', channel, told)
return 1
