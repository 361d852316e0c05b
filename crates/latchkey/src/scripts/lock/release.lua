-- Release a lock, handing it to the oldest live waiter, and (or only) leave its
-- queue. Needs clock.lua, grant.lua and queue.lua.
--
-- KEYS[1]  the lock key.   KEYS[2]  its fencing counter.   KEYS[3]  the wait queue.
-- KEYS[4]  the waiters' leases.
-- KEYS[5]  the pub/sub channel on which a waiter hears "you're next": the message is
--          the SHA-1 of its token (so the token itself never crosses the channel),
--          the fencing token it was granted (to a waiter fenced on demand, 'c' and
--          the server clock in µs, which orders handovers the same way) and when its
--          waiter lease ends (server ms, as this release saw it), joined by ':'.
-- ARGV     token, leaving: '' or, when the caller may be queued, the lock lease it
--          asked for (ms): it leaves the queue first; publish: 'sharded' on a
--          cluster (SPUBLISH: the message stays within the shard of the lock,
--          where its waiters listen with SSUBSCRIBE), else '' (PUBLISH).
--
-- Returns 1 if the lock was ours (and is now handed over, or free), else 0.

local lock, fence_key, queue, leases, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, leaving, sharded = ARGV[1], ARGV[2], ARGV[3] == 'sharded'

local holder = redis.call('GET', lock)
local head
if leaving == '' then
  if holder ~= token then
    return 0
  end
  -- The head of the line, read once for both outcomes. Nobody queued (the common
  -- case): no clock, no counter, no queue work. ZRANGE raises WRONGTYPE before
  -- anything is written.
  head = redis.call('ZRANGE', queue, 0, 0)[1]
  if not head then
    redis.call('DEL', lock)
    return 1
  end
else
  -- Leaving writes before the reads below: both keys' types are checked first.
  check_queue(queue, leases)
end
-- TIME first: it is the read that can fail (an ACL without it) before any write.
local us = server_time()
if leaving ~= '' then
  local members = {}
  for _, mode in ipairs({'f', 'p', 'F', 'P'}) do
    members[#members + 1] = queue_member(mode, leaving, token)
  end
  leave_queue(queue, leases, unpack(members))
end
if holder ~= token then
  return 0
end
-- Its reads (ZRANGE of the queue, ZSCORE of the leases) raise WRONGTYPE before
-- anything is written, so a handover needs no type check of its own.
local waiter, lease_left, lease_end = next_live_waiter(queue, leases, math.floor(us / 1000), head)
if not waiter then
  redis.call('DEL', lock)
  return 1
end
-- The lock passes straight to the oldest live waiter, plain or fair (with a fencing
-- token if it wants one with the lock), for the lease it asked for or what is left
-- of its waiter lease, whichever is shorter (so a waiter that died costs no more
-- than either): it starts as soon as it hears, and extends the lease to its own if it keeps the lock long enough.
-- Freeing the lock instead would let a newcomer (often the releaser, back for more)
-- take it first every time, and the waiter would starve.
local waiter_ttl, waiter_token = member_lease_and_token(waiter)
local ttl = math.min(lease_left, waiter_ttl or lease_left)
-- A waiter fenced on demand is told the clock ('c' first) instead. The counter is
-- read only for one that wants its token, after the writes above (this caller
-- leaving, dead waiters dropped): each stands on its own, so a counter that is not
-- a number fails the release with the line kept in order.
local counter = wants_fence(waiter) and fence_key
local last = counter and last_fence(counter) or 0
local fence = grant(lock, counter, waiter_token, ttl, last, us)
leave_queue(queue, leases, waiter)
-- pcall: the release has happened; an ACL user without rights on the channel must
-- not turn it into an error (the waiter's timer then finds the lock instead).
local handed = counter and string.format('%d', fence) or string.format('c%d', us)
local told = string.format('%s:%s:%d', redis.sha1hex(waiter_token), handed, lease_end)
redis.pcall(sharded and 'SPUBLISH' or 'PUBLISH', channel, told)
return 1
