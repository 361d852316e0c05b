-- Trade a holder's permits for fewer, under a new owner token, in one step: a
-- read-write lock's writer becoming a reader without letting another writer in
-- between. Needs clock.lua, grant.lua, queue.lua, expiry.lua and permits.lua.
--
-- KEYS     the semaphore's seven keys, as acquire.lua takes them (holders, fencing
--          counter, queue, waiters' leases, channel, the weight held, the permit
--          count).
-- ARGV     the holder's member token ("<weight>*<owner token>"), the new member
--          token ("<fewer>*<new owner token>"), the permit count, the new lease in
--          ms, publish ('sharded' on a cluster, else '').
--
-- The new member gets a new owner token, so a renewal of the old one still in
-- flight finds nothing and changes nothing. The permits given up serve the line at
-- once: readers queued behind the writer come in, in order.
--
-- Returns 1 when traded, 0 when the old permits were no longer live (nothing done).

local holders, fence_key, queue, leases, used_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6]
local old, new, permits = ARGV[1], ARGV[2], tonumber(ARGV[3])
local ttl, sharded = tonumber(ARGV[4]), ARGV[5] == 'sharded'

check_queue(queue, leases)
local last, us = before_grant(fence_key)
local now = math.floor(us / 1000)
local ends = redis.call('ZSCORE', holders, old)
if not ends or tonumber(ends) <= now then
  return 0
end
local total = weight_sum(holders, used_key)
local old_weight = weight_and_owner(old)
local new_weight = weight_and_owner(new)
redis.call('ZREM', holders, old)
redis.call('ZADD', holders, now + ttl, new)
keep_at_least(holders, ttl)
keep_at_least(KEYS[7], ttl)
store_used(used_key, total - old_weight + new_weight, ttl)
if redis.call('EXISTS', queue) == 1 then
  serve_line(KEYS, permits, live_weight(holders, used_key, now), last, us, sharded, nil)
end
return 1
