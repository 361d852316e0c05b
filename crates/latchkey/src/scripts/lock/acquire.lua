-- Take a lock through its queue: a fair lock's first try, and every try of a waiter
-- that joined (or renews its place in) the line. Needs clock.lua, grant.lua and
-- queue.lua.
--
-- KEYS[1]  the lock key.   KEYS[2]  its fencing counter.
-- KEYS[3]  the wait queue. KEYS[4]  the waiters' leases (see queue.lua).
-- All of a lock's keys share a hash slot, and every one of them expires: the counter
-- with the lease it fenced, the queue and the leases at most twice the longest
-- waiter lease in them after their last use (expiry.lua), so per-entity locks leave
-- nothing behind once no longer used.
-- ARGV     token, ttl_ms, mode (queue.lua: 'f', 'p', 'F' or 'P'), wait_ms: 0 = a
--          fair first try that does not queue; > 0 = join or stay in the queue with
--          a waiter lease of wait_ms.
--
-- Returns {1, fence, false, waiting, 0} when the lock is ours (waiting: others
-- still in the queue) and {0, pttl, holder, floor, lease_end} when not (see
-- grant.lua; floor and lease_end 0 from a try that did not queue).

local lock, fence_key, queue, leases = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, ttl, mode, wait_ms = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local member = queue_member(mode, ttl, token)
-- The counter, for a grant with a fencing token; false for one fenced on demand,
-- which neither reads nor writes it.
local counter = wants_fence(mode) and fence_key

-- A fair first try: a free lock with live waiters is owed to the first of them.
local function try_fair_once()
  local holder = redis.call('GET', lock)
  if holder and holder ~= token then
    return busy(lock, holder)
  end
  local last, us = before_grant(counter)
  if not holder then
    check_queue(queue, leases)
    if next_live_waiter(queue, leases, math.floor(us / 1000)) then
      return busy(lock, nil)
    end
  end
  return granted(grant(lock, counter, token, ttl, last, us))
end

-- A try from the queue: the lock may have been handed to us, and a fair waiter
-- takes a free lock only when it is at the head of the line.
local function try_in_line()
  local holder = redis.call('GET', lock)
  -- The leases' type, checked before any write. The queue's needs no call of its
  -- own on the common path (busy: the queue's ZADD is the first write, and raises
  -- WRONGTYPE before anything is written); the others count it before granting.
  redis.call('ZCARD', leases)
  local last, us = before_grant(counter)
  if holder == token then
    -- Handed over: the release took us out of the queue already.
    local queued = redis.call('ZCARD', queue)
    return granted(grant(lock, counter, token, ttl, last, us), queued)
  end
  if not holder then
    redis.call('ZCARD', queue) -- the queue's type, before a grant writes
    -- Plain waiters may barge; fair ones only take a free lock nobody waits ahead for.
    local head = is_fair(mode) and next_live_waiter(queue, leases, math.floor(us / 1000))
    if not head or head == member then
      local fence = grant(lock, counter, token, ttl, last, us)
      leave_queue(queue, leases, member)
      return granted(fence, redis.call('ZCARD', queue))
    end
  end
  -- NX keeps a waiter's place in line when it renews its lease.
  local lease_end = math.floor(us / 1000) + wait_ms
  redis.call('ZADD', queue, 'NX', us, member)
  redis.call('ZADD', leases, lease_end, member)
  keep_at_least(queue, wait_ms, 2 * wait_ms)
  keep_at_least(leases, wait_ms, 2 * wait_ms)
  return busy(lock, holder, math.max(last, us), lease_end)
end

if wait_ms == 0 then
  return try_fair_once()
end
return try_in_line()
