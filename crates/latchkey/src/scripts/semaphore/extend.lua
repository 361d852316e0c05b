-- Extend a permit: reset its lease to ARGV[2] ms from now, only while it is still
-- live. Needs clock.lua and queue.lua.
--
-- KEYS[1]  the holders (see permits.lua).   KEYS[2]  the weight they hold.
-- KEYS[3]  the permit count (see acquire.lua), which lives as long as the holders.
-- ARGV     the member token ("<weight>*<owner token>"), the new lease in ms.
--
-- Returns 1 when the lease was reset, 0 when the permit is no longer ours.

local holders, token, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
local _, now = server_time()
local ends = redis.call('ZSCORE', holders, token)
if not ends or tonumber(ends) <= now then
  return 0
end
redis.call('ZADD', holders, 'XX', now + ttl, token)
keep_at_least(holders, ttl)
keep_at_least(KEYS[2], ttl)
keep_at_least(KEYS[3], ttl)
return 1
