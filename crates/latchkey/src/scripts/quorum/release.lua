-- Release a quorum lock on one node, and tell this node's waiters it is free.
--
-- Unlike the single-node release, this never hands the lock to a waiter: a quorum
-- keeps no queue, and a failed attempt must be undone on every node without giving
-- any of them away. Waiters (all of them, on every node) wake and try again.
--
-- KEYS[1]  the lock key.
-- KEYS[2]  the pub/sub channel the lock's waiters listen on; the message '*' wakes
--          every one of them.
-- ARGV     token.
--
-- Returns 1 if the lock was the caller's here (now deleted), else 0.

local lock, channel = KEYS[1], KEYS[2]

if redis.call('GET', lock) ~= ARGV[1] then
  return 0
end
redis.call('DEL', lock)
-- pcall: the release has happened; an ACL user without rights on the channel must
-- not turn it into an error (waiters then find the lock free on their timers).
redis.pcall('PUBLISH', channel, '*')
return 1
