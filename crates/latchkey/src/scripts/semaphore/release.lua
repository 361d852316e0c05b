-- Give permits back, serving the line, and (or only) leave the line. Needs
-- clock.lua, grant.lua, queue.lua and permits.lua.
--
-- KEYS[1]  the holders.   KEYS[2]  the fencing counter.   KEYS[3]  the wait queue.
-- KEYS[4]  the waiters' leases.   KEYS[6]  the weight the holders hold (permits.lua).
-- KEYS[5]  the channel on which a served waiter hears "your permits are granted":
--          the SHA-1 of its owner token, its fencing token and when its waiter
--          lease ends (server ms), joined by ':', as for a lock's handover.
-- ARGV     owner token, weight, permits, leaving ('' or the lease it asked for in
--          ms, when the caller may be in line: it leaves first), publish
--          ('sharded' on a cluster, else '').
--
-- Returns 1 if the permits were still ours, else 0. Either way the line is served:
-- a waiter leaving from the head may unblock smaller ones behind it.

local holders, fence_key, queue, leases, used_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6]
local owner, weight, permits = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local leaving, sharded = ARGV[4], ARGV[5] == 'sharded'
local token = weighed(ARGV[2], owner)

check_queue(queue, leases)
local last, us = before_grant(fence_key)
local now = math.floor(us / 1000)
local total = weight_sum(holders, used_key)
if leaving ~= '' then
  leave_queue(queue, leases, queue_member('f', leaving, token))
end
local lease_end = tonumber(redis.call('ZSCORE', holders, token) or 0)
if redis.call('ZREM', holders, token) == 1 then
  store_used(used_key, total - weight, math.max(redis.call('PTTL', holders), 1))
end
if redis.call('EXISTS', queue) == 1 then
  serve_line(KEYS, permits, live_weight(holders, used_key, now), last, us, sharded, nil)
end
if lease_end > now then
  return 1
end
return 0
