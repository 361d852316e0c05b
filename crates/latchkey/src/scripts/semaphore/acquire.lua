-- Take permits of a semaphore, or wait for them in line. Needs clock.lua,
-- grant.lua, queue.lua and permits.lua.
--
-- KEYS[1]  the holders (see permits.lua).   KEYS[2]  the fencing counter.
-- KEYS[3]  the wait queue.   KEYS[4]  the waiters' leases (see queue.lua).
-- KEYS[5]  the channel on which served waiters are told (see release.lua).
-- KEYS[6]  the weight the holders set holds (see permits.lua).
-- KEYS[7]  the permit count the semaphore's users agreed on (see below).
-- ARGV     owner token, ttl_ms, weight, permits, wait_ms (0: a first try that does
--          not queue; > 0: join or stay in line with a waiter lease of wait_ms),
--          publish ('sharded' on a cluster, else ''), front ('front': join the
--          line at its head, ahead of everyone: an upgradeable read's upgrade, which
--          no writer can be granted ahead of anyway; else '').
--
-- Returns {1, fence, false, waiting, 0} when the permits are ours and
-- {0, pttl, false, floor, lease_end} when not (see permits.lua and grant.lua); the
-- error `LKPERMITS n` when the semaphore is in use with n permits, not ARGV[4].

local holders, fence_key, queue, leases, used_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[6]
local owner, ttl, weight = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local permits, wait_ms, sharded = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == 'sharded'
local token = weighed(ARGV[3], owner)
local member = queue_member('f', ttl, token)

check_queue(queue, leases)
local last, us = before_grant(fence_key)
local now = math.floor(us / 1000)
local used = live_weight(holders, used_key, now)

-- The permit count is stored beside the holders while anyone holds or waits: a
-- caller that counts differently is refused, so a caller saying 2 never slips in
-- beside the holders of a one-permit semaphore. Once the semaphore is idle (no live
-- holder, nobody in line) a new count is taken: that is how the count changes.
local permits_key = KEYS[7]
local agreed = tonumber(redis.call('GET', permits_key) or '')
if agreed ~= permits then
  if agreed and (used > 0 or next_live_waiter(queue, leases, now)) then
    return redis.error_reply('LKPERMITS ' .. string.format('%d', agreed))
  end
  redis.call('SET', permits_key, ARGV[4], 'KEEPTTL')
end
keep_at_least(permits_key, math.max(ttl, wait_ms))

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
if used + weight <= permits and not next_live_waiter(queue, leases, now) then
  local fence = grant_permit(holders, used_key, fence_key, token, weight, ttl, last, us)
  leave_queue(queue, leases, member)
  return {1, fence, false, redis.call('ZCARD', queue), 0}
end
-- Enough permits are free, but owed to the waiters ahead.
local owed = used + weight <= permits
if wait_ms == 0 then
  return no_permit(holders, now, owed)
end
-- NX keeps a waiter's place in line when it renews its lease.
local lease_end = now + wait_ms
local arrived = us
if ARGV[7] == 'front' then
  arrived = 0
end
redis.call('ZADD', queue, 'NX', arrived, member)
redis.call('ZADD', leases, lease_end, member)
keep_at_least(queue, wait_ms, 2 * wait_ms)
keep_at_least(leases, wait_ms, 2 * wait_ms)
return no_permit(holders, now, owed, math.max(last, us), lease_end)
