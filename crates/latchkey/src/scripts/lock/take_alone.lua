-- A fair lock's first try when it needs no fencing token: take it if it is free
-- and nobody waits for it, with the fewest keys and arguments and no helpers. A
-- lock with a queue (whose head may be owed it) or one already ours (an earlier
-- try whose reply was lost: its lease must be reset) is left to acquire.lua.
--
-- KEYS[1]  the lock key.   KEYS[2]  its wait queue. (Not the waiters' leases: they
--          matter only to a queue, and every key passed costs every call.)
-- ARGV     token, ttl_ms.
--
-- Returns 1 when the lock is now ours, {pttl, holder} when someone else holds it,
-- -1 when acquire.lua must answer. (Bare integers on the common path: a reply
-- table costs the server more to convert.)

local lock = KEYS[1]
local token = ARGV[1]
local holder = redis.call('GET', lock)
if holder == token then
  return -1
end
if holder then
  return {redis.call('PTTL', lock), holder}
end
-- EXISTS, not a queue command: it cannot fail on a key of another type (which
-- acquire.lua then reports before writing anything).
if redis.call('EXISTS', KEYS[2]) == 1 then
  return -1
end
redis.call('SET', lock, token, 'PX', ARGV[2])
return 1
