-- Take permits of a semaphore nobody waits for, when they fit and the caller needs
-- no fencing token: the common acquire, with the fewest calls (each call inside a
-- script costs the server about 7 000 instructions on Redis 7.0).
-- Anything else is left to acquire.lua: a line, another permit count than the one
-- agreed on (an idle semaphore takes ours), a weight sum to count again, permits that fit only once ended
-- leases are dropped, and permits already ours (an earlier try whose reply was lost:
-- acquire.lua renews them). Every read comes before the first write, so a key of
-- another type fails the script with nothing written.
--
-- KEYS[1]  the holders (see permits.lua).   KEYS[2]  the weight they hold.
-- KEYS[3]  the permit count agreed on.      KEYS[4]  the wait queue.
-- ARGV     member ("<weight>*<owner token>"), ttl_ms, weight, permits.
-- Needs clock.lua and expiry.lua.
--
-- Returns 1 when the permits are now ours, -1 when acquire.lua must answer.

local holders, used_key, permits_key = KEYS[1], KEYS[2], KEYS[3]
local ttl = tonumber(ARGV[2])

if redis.call('EXISTS', KEYS[4]) == 1 then
  return -1
end
-- The count agreed on: ours, or none yet (then only an idle semaphore takes ours).
local agreed = redis.call('GET', permits_key)
if agreed and agreed ~= ARGV[4] then
  return -1
end
-- The weight sum, including ended permits not yet dropped. Missing with holders
-- left (lost): acquire.lua counts it again. Missing without: a fresh start.
local stored = redis.call('GET', used_key)
local fresh = not stored
if fresh and redis.call('EXISTS', holders) == 1 then
  return -1
end
if not agreed and not fresh then
  return -1
end
local used = tonumber(stored or '0')
if not used then
  return -1
end
used = used + tonumber(ARGV[3])
if used > tonumber(ARGV[4]) then
  return -1
end
local _, now = server_time()
local ends = now + ttl
if redis.call('ZADD', holders, 'NX', string.format('%d', ends), ARGV[1]) == 0 then
  return -1
end
-- The holders, their weight sum and the count live at least as long as this lease.
if fresh then
  redis.call('SET', used_key, string.format('%d', used), 'PX', ARGV[2])
  redis.call('PEXPIRE', holders, ARGV[2])
else
  redis.call('SET', used_key, string.format('%d', used), 'KEEPTTL')
  keep_at_least(holders, ttl)
  keep_at_least(used_key, ttl)
end
if agreed then
  keep_at_least(permits_key, ttl)
else
  redis.call('SET', permits_key, ARGV[4], 'PX', ARGV[2])
end
return 1
