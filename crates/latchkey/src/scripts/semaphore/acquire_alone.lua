-- Take permits of a semaphore nobody waits for, when they fit and the caller needs
-- no fencing token: the common acquire, with the fewest calls (each call inside a
-- script costs the server about 7 000 instructions on Redis 7.0; an idle semaphore
-- takes 8 here, one in use 9 to 12).
-- Anything else is left to acquire.lua: a line, another permit count than the one
-- agreed on while the semaphore is in use, a weight sum to count again, permits that
-- fit only once ended leases are dropped, and permits already ours (an earlier try
-- whose reply was lost: acquire.lua renews them). A key of another type fails the
-- script with nothing written.
--
-- KEYS[1]  the holders (see permits.lua).   KEYS[2]  the weight they hold.
-- KEYS[3]  the permit count agreed on.      KEYS[4]  the wait queue.
-- ARGV     member ("<weight>*<owner token>"), ttl_ms, weight, permits.
-- Needs clock.lua and expiry.lua.
--
-- Returns 1 when the permits are now ours, -1 when acquire.lua must answer.

local holders, used_key, permits_key = KEYS[1], KEYS[2], KEYS[3]
local ttl, weight, permits = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if weight > permits then
  return -1
end

-- The weight sum, including ended permits not yet dropped.
local stored = redis.call('GET', used_key)
if not stored then
  -- None: the semaphore is idle, or its holders lost their sum (acquire.lua
  -- counts it again). Idle (nobody holds, nobody waits), it takes our count, as
  -- acquire.lua does, whatever count is stored: three keys written with one lease.
  -- The stored count is read only so that a key of another type fails the script
  -- with nothing written (`SET … GET` would do both in one call, but needs Redis
  -- 6.2, and nothing else here does).
  if redis.call('EXISTS', KEYS[4], holders) ~= 0 then
    return -1
  end
  redis.call('GET', permits_key)
  redis.call('SET', permits_key, ARGV[4], 'PX', ARGV[2])
  local _, now = server_time()
  redis.call('ZADD', holders, string.format('%d', now + ttl), ARGV[1])
  redis.call('PEXPIRE', holders, ARGV[2])
  redis.call('SET', used_key, string.format('%d', weight), 'PX', ARGV[2])
  return 1
end

-- In use: nobody may wait, the count must be the one agreed on, and ours must fit.
local used = tonumber(stored)
if not is_count(used) or redis.call('EXISTS', KEYS[4]) == 1 then
  return -1
end
if redis.call('GET', permits_key) ~= ARGV[4] then
  return -1
end
used = used + weight
if used > permits then
  return -1
end
local _, now = server_time()
if redis.call('ZADD', holders, 'NX', string.format('%d', now + ttl), ARGV[1]) == 0 then
  return -1
end
-- The holders, their weight sum and the count live at least as long as this lease.
redis.call('SET', used_key, string.format('%d', used), 'KEEPTTL')
keep_at_least(holders, ttl)
keep_at_least(used_key, ttl)
keep_at_least(permits_key, ttl)
return 1
