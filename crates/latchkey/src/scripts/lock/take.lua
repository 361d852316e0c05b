-- Take a lock without joining its queue: a plain lock's first try, the most common
-- call of all, so it touches only the lock and its counter. Needs clock.lua and
-- grant.lua.
--
-- KEYS[1]  the lock key: exactly the owner token with a PX expiry, the layout of the
--          plain `SET key token NX PX ttl` pattern, so redis-py's Lock, redsync,
--          node-redlock and latchkey on the same key exclude each other.
-- KEYS[2]  the fencing counter: the last token handed out, expiring with the lease.
-- ARGV     token, ttl_ms.
--
-- Returns {1, fence, false, 0, 0} when the lock is ours, {0, pttl, holder, 0, 0}
-- when not (see grant.lua).

local lock, fence_key = KEYS[1], KEYS[2]
local token, ttl = ARGV[1], ARGV[2]

-- GET first: it raises WRONGTYPE for a key of another type before anything is
-- written, and it finds a lock an earlier try with this token set (its reply lost).
local holder = redis.call('GET', lock)
if holder and holder ~= token then
  return busy(lock, holder)
end
return granted(grant(lock, fence_key, token, ttl, before_grant(fence_key)))
