-- Release a quorum lock on one node, and tell this node's waiters it is free. Needs
-- ended.lua.
--
-- Unlike the single-node release, this never hands the lock to a waiter: a quorum
-- keeps no queue, and a failed attempt must be undone on every node without giving
-- any of them away. Waiters (all of them, on every node) wake and try again.
--
-- The value is marked ended whether or not this node held it: a take or a
-- take-back of it still on its way here must not set it after this release.
--
-- KEYS[1]  the lock key.
-- KEYS[2]  the pub/sub channel the lock's waiters listen on; the message '*' wakes
--          every one of them.
-- KEYS[3]  the values released lately (see ended.lua).
-- ARGV     token, ttl_ms (how long a late request of this value may still come).
--
-- Returns 1 if the lock was the caller's here (now deleted), else 0.

local lock, channel, ended = KEYS[1], KEYS[2], KEYS[3]
local token, ttl = ARGV[1], ARGV[2]

-- GET first: it raises WRONGTYPE before anything is written.
local held = redis.call('GET', lock) == token
mark_ended(ended, token, ttl)
if not held then
  return 0
end
redis.call('DEL', lock)
-- pcall: the release has happened; an ACL user without rights on the channel must
-- not turn it into an error (waiters then find the lock free on their timers).
redis.pcall('PUBLISH', channel, '*')
return 1
