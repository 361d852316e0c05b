-- Take permits of a semaphore, or wait for them in line. Needs clock.lua,
-- grant.lua, queue.lua and permits.lua.
--
-- KEYS[1]  the holders (see permits.lua).   KEYS[2]  the fencing counter.
-- KEYS[3]  the wait queue.   KEYS[4]  the waiters' leases (see queue.lua).
-- KEYS[5]  the channel on which served waiters are told (see release.lua).
-- KEYS[6]  the weight the holders set holds (see permits.lua).
-- ARGV     owner token, ttl_ms, weight, permits, wait_ms (0: a first try that does
--          not queue; > 0: join or stay in line with a waiter lease of wait_ms),
--          publish ('sharded' on a cluster, else '').
--
-- Returns {1, fence, false, waiting, 0} when the permits are ours and
-- {0, pttl, false, floor, lease_end} when not (see permits.lua and grant.lua).

local holders, fence_key, queue, leases, used_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6]
local owner, ttl, weight = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local permits, wait_ms, sharded = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == 'sharded'
local token = weighed(ARGV[3], owner)
local member = queue_member('f', ttl, token)

check_queue(queue, leases)
local last, us = before_grant(fence_key)
local now = math.floor(us / 1000)
local used = live_weight(holders, used_key, now)

-- Already ours: a release served us, or an earlier try's reply was lost. Renew.
if redis.call('ZSCORE', holders, token) then
  local fence = grant_permit(holders, used_key, fence_key, token, weight, ttl, last, us)
  return {1, fence, false, redis.call('ZCARD', queue), 0}
end

-- The line first: whoever waits ahead of us and fits now is served (a permit came
-- back when a lease ran out, and no release was there to hand it on).
local caller_fence
used, last, caller_fence = serve_line(KEYS, permits, used, last, us, sharded, token)
if caller_fence then
  return {1, caller_fence, false, redis.call('ZCARD', queue), 0}
end
if used + weight <= permits and not next_live_waiter(queue, leases) then
  local fence = grant_permit(holders, used_key, fence_key, token, weight, ttl, last, us)
  leave_queue(queue, leases, member)
  return {1, fence, false, redis.call('ZCARD', queue), 0}
end
if wait_ms == 0 then
  return no_permit(holders, now)
end
-- NX keeps a waiter's place in line when it renews its lease.
local lease_end = now + wait_ms
redis.call('ZADD', queue, 'NX', us, member)
redis.call('ZADD', leases, lease_end, member)
keep_at_least(queue, wait_ms)
keep_at_least(leases, wait_ms)
return no_permit(holders, now, math.max(last, us), lease_end)
