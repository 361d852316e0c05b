-- Break a semaphore (or read-write lock): drop every permit, whoever holds it, and
-- serve the line, for `latchkey release --force`. Needs clock.lua, grant.lua,
-- queue.lua and permits.lua.
--
-- KEYS  as release.lua, and KEYS[7] the stored permit count.
-- ARGV[1]  publish ('sharded' on a cluster, else '').
--
-- Returns {member, ms left, …}: the live permits it dropped. Their holders learn
-- at their next renewal (extend.lua finds nothing) that the lease is lost. The
-- fencing counter is kept, so the next grant's token is larger than theirs.

local holders, queue, leases, used_key = KEYS[1], KEYS[3], KEYS[4], KEYS[6]
local sharded = ARGV[1] == 'sharded'

check_queue(queue, leases)
local last, us = before_grant(KEYS[2])
local now = math.floor(us / 1000)
local dropped = redis.call('ZRANGEBYSCORE', holders, string.format('(%d', now), '+inf', 'WITHSCORES')
for i = 2, #dropped, 2 do
  dropped[i] = tonumber(dropped[i]) - now
end
redis.call('DEL', holders, used_key)
local permits = tonumber(redis.call('GET', KEYS[7]) or '')
if permits and redis.call('EXISTS', queue) == 1 then
  serve_line(KEYS, permits, 0, last, us, sharded, nil)
end
return dropped
