-- The wait queue: a sorted set of waiters by arrival (score = server µs), and
-- beside it the waiters' leases: the same members, score = when the lease ends (ms).
-- A member is the waiter's mode, the lock lease it asks for (ms), '/' and its owner
-- token: "p30000/<token>". The mode: 'f' fair, 'p' plain, both handed the lock with
-- a fencing token; 'F' and 'P' the same, handed it without one (the holder asks for
-- its token when it needs it: fence.lua), which spares a handover the counter's
-- GET and SET. Lower case is also what a latchkey before fencing on demand queued,
-- and what it expects: such a waiter always gets its token.

-- The member for a waiter.
local function queue_member(mode, ttl, token)
  return mode .. ttl .. '/' .. token
end

-- Whether a member (or a mode) waits in a fair line.
local function is_fair(member)
  return string.lower(string.sub(member, 1, 1)) == 'f'
end

-- Whether a member (or a mode) is handed the lock with its fencing token.
local function wants_fence(member)
  return string.find(member, '^[fp]') ~= nil
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

-- Takes `member` (or whichever of several members is there) out of the line.
local function leave_queue(queue, leases, ...)
  if redis.call('ZREM', queue, ...) > 0 then
    redis.call('ZREM', leases, ...)
  end
end

-- The oldest waiter whose lease has not ended, what is left of its lease (ms) and
-- when it ends (server ms); dead ones are dropped on the way, so a crashed waiter
-- delays the line by at most its waiter lease. `now`: the server clock in ms, as the
-- caller read it (every caller reads it before its first write anyway; a second
-- TIME would cost a call). `head`: the queue's head if the caller has just read it
-- (optional; it saves a ZRANGE).
local function next_live_waiter(queue, leases, now, head)
  while true do
    head = head or redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then
      return nil
    end
    local ends = tonumber(redis.call('ZSCORE', leases, head) or 0)
    if ends > now then
      return head, ends - now, ends
    end
    leave_queue(queue, leases, head)
    head = nil
  end
end
