-- The wait queue: a sorted set of waiters by arrival (score = server µs), and
-- beside it the waiters' leases: the same members, score = when the lease ends (ms).
-- A member is the waiter's mode ('f' fair, 'p' plain), the lock lease it asks for
-- (ms), '/' and its owner token: "p30000/<token>".

-- The member for a waiter.
local function queue_member(mode, ttl, token)
  return mode .. ttl .. '/' .. token
end

-- The lease a member asked for (ms) and its token. A member queued by a latchkey
-- before members carried the lease is mode and token only: no lease then.
local function member_lease_and_token(member)
  local ttl, token = string.match(member, '^%a(%d+)/(.+)$')
  if not token then
    return nil, string.sub(member, 2)
  end
  return tonumber(ttl), token
end

-- Raises WRONGTYPE now, before any write, if the queue or the leases are not sorted
-- sets. Returns how many are queued.
local function check_queue(queue, leases)
  redis.call('ZCARD', leases)
  return redis.call('ZCARD', queue)
end

local function leave_queue(queue, leases, member)
  if redis.call('ZREM', queue, member) == 1 then
    redis.call('ZREM', leases, member)
  end
end

-- The oldest waiter whose lease has not ended, what is left of its lease (ms) and
-- when it ends (server ms); dead ones are dropped on the way, so a crashed waiter
-- delays the line by at most its waiter lease. `now`: the server clock in ms, as the
-- caller read it (every caller reads it before its first write anyway; a second
-- TIME would cost a call).
local function next_live_waiter(queue, leases, now)
  while true do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then
      return nil
    end
    local ends = tonumber(redis.call('ZSCORE', leases, head) or 0)
    if ends > now then
      return head, ends - now, ends
    end
    leave_queue(queue, leases, head)
  end
end
