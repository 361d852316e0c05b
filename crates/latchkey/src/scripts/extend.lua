-- Extend a lock: reset its lease to ARGV[2] ms from now, only if it is still ours.
--
-- The lease is reset, not added to: extending a 10 s lock that has 3 s left by 10 s
-- leaves 10 s, never 13 s, so repeated extends cannot push the expiry out unbounded.
--
-- KEYS[1]  the lock key.
-- ARGV[1]  the owner token.
-- ARGV[2]  the new lease in milliseconds.
--
-- Returns 1 when the lease was reset, 0 when the lock is no longer ours.

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
