-- Release a lock: delete it only if it still holds our owner token.
--
-- A plain DEL (or a GET then DEL from the client) can delete a lock that expired and
-- was taken by someone else in between; comparing and deleting in one script cannot.
--
-- KEYS[1]  the lock key.
-- ARGV[1]  the owner token.
--
-- Returns 1 when the lock was ours and is now free, 0 when it was not ours (expired,
-- taken over, or broken by an operator).

if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
