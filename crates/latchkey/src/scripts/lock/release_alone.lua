-- Release a lock nobody waits for: the common release, with the fewest keys and
-- arguments (the server copies each into the script's KEYS and ARGV on every call)
-- and no helpers to define. A lock others wait for is left as it is, for release.lua
-- to hand over.
--
-- KEYS[1]  the lock key.   KEYS[2]  its wait queue.
-- ARGV     token.
--
-- Returns 1 if the lock was ours and is now free, 0 if it was not ours, -1 if it
-- was ours but others are queued (nothing done: run release.lua).

local lock, queue = KEYS[1], KEYS[2]
if redis.call('GET', lock) ~= ARGV[1] then
  return 0
end
-- EXISTS, not a queue command: it cannot fail on a key of another type.
if redis.call('EXISTS', queue) == 1 then
  return -1
end
redis.call('DEL', lock)
return 1
