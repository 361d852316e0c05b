-- The lock's state machine: take, wait in line, hand over, release.
--
-- KEYS[1]  the lock key: exactly the owner token with a PX expiry, the layout of the
--          plain `SET key token NX PX ttl` pattern, so redis-py's Lock, redsync,
--          node-redlock and latchkey on the same key exclude each other.
-- KEYS[2]  the fencing counter: the last token handed out, expiring with the lease.
-- KEYS[3]  the wait queue: a sorted set of waiters by arrival (score = server µs);
--          each member is the waiter's mode ('f' fair, 'p' plain) and owner token.
-- KEYS[4]  the waiters' leases: the same members, score = when the lease ends (ms).
-- KEYS[5]  the pub/sub channel on which a waiter hears "you're next" (the SHA-1 of
--          its token, so the token itself never crosses the channel).
-- All five share a hash slot. A plain first try ('acquire' with mode 'p' and wait 0)
-- declares only KEYS[1] and KEYS[2], the only ones it touches.
--
-- Every companion key expires: the counter with the lease it fenced, the queue and
-- the leases with the longest waiter lease in them. Per-entity locks (per order, per
-- user) therefore leave nothing behind once they are no longer used.
--
-- A script that fails halfway is not rolled back, so every read that can fail (a key
-- of another type, a counter that is not a number) runs before the first write.
--
-- ARGV[1] is the operation:
--   'acquire' token ttl_ms mode wait_ms
--        mode 'f' or 'p'; wait_ms 0 = just try, > 0 = join or stay in the queue with
--        a waiter lease of wait_ms. Returns {1, fence, nil, waiting} when the lock is
--        ours (waiting: others in the queue, when the script looked; else 0) and
--        {0, pttl, holder, 0} when not (pttl -1: held without expiry, -2: free but owed
--        to a fair waiter, and then no holder). The holder lets the caller say who
--        holds it, and tell another library's holder, whose release wakes nobody.
--   'pass' token next_token ttl_ms ahead
--        hand a held lock straight to another owner in the same process, with a fresh
--        lease and fencing token, unless someone waits in the queue (then they come
--        first: the caller releases instead) and `ahead` is not '1' (the caller passes
--        ahead of them for a bounded time), never ahead of a fair waiter at the head
--        of the queue. Returns the new fence, or 0 if not passed.
--        Retrying a pass whose reply was lost is safe: it finds next_token holding.
--   'release' token leaving
--        leaving '1' = the caller may be queued: leave the queue first. Returns 1 if
--        the lock was ours (and is now handed to the oldest live waiter, or free),
--        else 0.

local lock, fence_key, queue, leases, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]

-- The server clock in µs and in ms (µs stay below 2^53, exact in a Lua number).
local function server_time()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return us, math.floor(us / 1000)
end

-- The last fencing token handed out (0 if the counter is gone). Raises, before the
-- caller has written anything, if the counter holds something that is not a count.
local function last_fence()
  local stored = redis.call('GET', fence_key)
  if not stored then
    return 0
  end
  local last = tonumber(stored)
  if not last then
    error({err = 'ERR the fencing counter ' .. fence_key .. ' is not a number; delete it'})
  end
  return last
end

-- Makes the lock `token`'s for `ttl` ms (a fresh take, or a claim of a lock that
-- holds `token` already: a release handed it over, or an earlier request with this
-- token whose reply was lost set it) and hands out the next fencing token:
-- max(last + 1, server time in µs), on every grant. A counter restored older than it
-- was (an RDB snapshot, an AOF that lost its tail, a replica that missed writes) or
-- lost altogether still yields a token above every earlier one, as long as the server
-- clock never steps back past the last token. So the counter may expire with the
-- lease it fenced. TIME is read before either write: a TIME the user may not run must
-- fail the script before it sets a lock nobody was told about.
local function grant(token, ttl, last)
  local us = server_time()
  redis.call('SET', lock, token, 'PX', ttl)
  local fence = math.max(last + 1, us)
  redis.call('SET', fence_key, string.format('%d', fence), 'PX', ttl)
  return fence
end

-- Raises WRONGTYPE now, before any write, if the queue or the leases are not sorted
-- sets. Returns how many are queued.
local function check_queue()
  redis.call('ZCARD', leases)
  return redis.call('ZCARD', queue)
end

-- Makes `key` live at least `ms` more: the queue outlives every waiter lease in it.
local function keep_at_least(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end

-- The replies to an acquire: the lock is ours with this fence (and `waiting` others
-- are queued, so a task of our process gets it only by a bounded pass ahead), or it
-- is not.
local function granted(fence, waiting)
  return {1, fence, false, waiting or 0}
end

local function busy(holder)
  return {0, redis.call('PTTL', lock), holder or false, 0}
end

local function leave_queue(member)
  if redis.call('ZREM', queue, member) == 1 then
    redis.call('ZREM', leases, member)
  end
end

-- The oldest waiter whose lease has not ended; dead ones are dropped on the way, so
-- a crashed waiter delays the line by at most its waiter lease.
local function next_live_waiter()
  local now
  while true do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then
      return nil
    end
    if not now then
      local _, ms = server_time()
      now = ms
    end
    local ends = tonumber(redis.call('ZSCORE', leases, head) or 0)
    if ends > now then
      return head, ends - now
    end
    leave_queue(head)
  end
end

-- A first try, not queued. GET comes first: it raises WRONGTYPE for a key of another
-- type before anything is written, and it finds a lock an earlier try already set.
local function try_once(token, ttl, mode)
  local holder = redis.call('GET', lock)
  local last = last_fence()
  if holder == token then
    return granted(grant(token, ttl, last))
  end
  if holder then
    return busy(holder)
  end
  if mode == 'f' then
    check_queue()
    -- Fair: a free lock with live waiters is owed to the first of them.
    if next_live_waiter() then
      return busy(nil)
    end
  end
  return granted(grant(token, ttl, last))
end

-- A try from the wait queue: the lock may have been handed to us, and a fair
-- waiter takes a free lock only when it is at the head of the line.
local function try_in_line(token, ttl, mode, member, wait_ms)
  local holder = redis.call('GET', lock)
  local queued = check_queue()
  local last = last_fence()
  if holder == token then
    -- Handed over: the release took us out of the queue already.
    return granted(grant(token, ttl, last), queued)
  end
  if not holder then
    -- Plain waiters may barge; fair ones only take a free lock nobody waits ahead for.
    local head = mode == 'f' and next_live_waiter()
    if not head or head == member then
      local fence = grant(token, ttl, last)
      leave_queue(member)
      return granted(fence, redis.call('ZCARD', queue))
    end
  end
  -- NX keeps a waiter's place in line when it renews its lease.
  local us, ms = server_time()
  redis.call('ZADD', queue, 'NX', us, member)
  redis.call('ZADD', leases, ms + wait_ms, member)
  keep_at_least(queue, wait_ms)
  keep_at_least(leases, wait_ms)
  return busy(holder)
end

local function acquire(token, ttl, mode, wait_ms)
  if wait_ms == 0 then
    return try_once(token, ttl, mode)
  end
  return try_in_line(token, ttl, mode, mode .. token, wait_ms)
end

local function release(token, leaving)
  local holder = redis.call('GET', lock)
  -- Nobody ever queued (the common case): no queue work, and EXISTS cannot fail
  -- on a key of another type the way the queue commands would.
  if leaving ~= '1' and holder == token and redis.call('EXISTS', queue) == 0 then
    redis.call('DEL', lock)
    return 1
  end
  check_queue()
  if leaving == '1' then
    leave_queue('f' .. token)
    leave_queue('p' .. token)
  end
  if holder ~= token then
    return 0
  end
  local waiter, lease_left = next_live_waiter()
  if not waiter then
    redis.call('DEL', lock)
    return 1
  end
  leave_queue(waiter)
  -- The lock passes straight to the oldest live waiter, plain or fair, for as long
  -- as its waiter lease still runs; it claims the lock with its full lease when it
  -- hears of it. Freeing the lock instead would let a newcomer (often the releaser,
  -- back for more) take it first every time, and the waiter would starve.
  local waiter_token = string.sub(waiter, 2)
  redis.call('SET', lock, waiter_token, 'PX', lease_left)
  -- pcall: the release has happened; an ACL user without rights on the channel must
  -- not turn it into an error (the waiter's timer then finds the lock instead).
  redis.pcall('PUBLISH', channel, redis.sha1hex(waiter_token))
  return 1
end

local function pass(token, next_token, ttl, ahead)
  local holder = redis.call('GET', lock)
  local last = last_fence()
  -- An earlier pass whose reply was lost made it next_token's already.
  if holder == next_token then
    return grant(next_token, ttl, last)
  end
  if holder ~= token then
    return 0
  end
  if ahead ~= '1' and redis.call('EXISTS', queue) == 1 then
    return 0
  end
  -- Never ahead of a fair waiter at the head of the line: FIFO is its promise.
  if ahead == '1' and string.sub(redis.call('ZRANGE', queue, 0, 0)[1] or '', 1, 1) == 'f' then
    return 0
  end
  return grant(next_token, ttl, last)
end

local op = ARGV[1]
if op == 'acquire' then
  return acquire(ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]))
elseif op == 'pass' then
  return pass(ARGV[2], ARGV[3], ARGV[4], ARGV[5])
elseif op == 'release' then
  return release(ARGV[2], ARGV[3])
end
return redis.error_reply('ERR lock.lua: unknown operation ' .. tostring(op))
