-- The lock's state machine: take, wait in line, hand over, release.
--
-- KEYS[1]  the lock key: exactly the owner token with a PX expiry, the layout of the
--          plain `SET key token NX PX ttl` pattern, so redis-py's Lock, redsync,
--          node-redlock and latchkey on the same key exclude each other.
-- KEYS[2]  the fencing counter.
-- KEYS[3]  the wait queue: a sorted set of waiters by arrival (score = server µs);
--          each member is the waiter's mode ('f' fair, 'p' plain) and owner token.
-- KEYS[4]  the waiters' leases: the same members, score = when the lease ends (ms).
-- KEYS[5]  the pub/sub channel on which a waiter hears "you're next" (the SHA-1 of
--          its token, so the token itself never crosses the channel).
-- All five share a hash slot. A plain first try ('acquire' with mode 'p' and wait 0)
-- declares only KEYS[1] and KEYS[2], the only ones it touches.
--
-- ARGV[1] is the operation:
--   'acquire' token ttl_ms mode wait_ms
--        mode 'f' or 'p'; wait_ms 0 = just try, > 0 = join or stay in the queue with
--        a waiter lease of wait_ms. Returns {1, fence} when the lock is ours and
--        {0, pttl} when not (pttl -1: held without expiry).
--   'pass' token next_token ttl_ms
--        hand a held lock straight to another owner in the same process, with a fresh
--        lease and fencing token, unless someone waits in the queue (then they come
--        first: the caller releases instead). Returns the new fence, or 0 if not passed.
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

-- The next fencing token. The counter is lost when a server that keeps nothing on
-- disk restarts; INCR then answers 1, and flooring at the server clock (µs) keeps
-- tokens strictly increasing anyway. Returns nil (after undoing the lock) if the
-- counter key holds something INCR cannot use.
local function next_fence()
  local fence = redis.pcall('INCR', fence_key)
  if type(fence) == 'table' then
    return nil, fence
  end
  if fence == 1 then
    fence = server_time()
    redis.call('SET', fence_key, string.format('%d', fence))
  end
  return fence
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

local function granted(member, queued)
  local fence, err = next_fence()
  if not fence then
    redis.call('DEL', lock)
    return err
  end
  if queued then
    leave_queue(member)
  end
  return {1, fence}
end

-- A first try, not queued: nothing can have been handed to us yet, so SET NX
-- answers for the common case (a free lock) in one command.
local function try_once(token, ttl, mode, member)
  if redis.call('SET', lock, token, 'NX', 'PX', ttl) then
    if mode == 'p' or not next_live_waiter() then
      return granted(member, false)
    end
    -- Fair: a free lock with live waiters is owed to the first of them.
    redis.call('DEL', lock)
    return {0, -2}
  end
  -- SET NX also fails on a key of another type; GET raises WRONGTYPE for it.
  redis.call('GET', lock)
  return {0, redis.call('PTTL', lock)}
end

-- A try from the wait queue: the lock may have been handed to us, and a fair
-- waiter takes a free lock only when it is at the head of the line.
local function try_in_line(token, ttl, mode, member, wait_ms)
  local holder = redis.call('GET', lock)
  -- A release handed the lock to us with a short lease: claim it with our own.
  if holder == token then
    redis.call('PEXPIRE', lock, ttl)
    return granted(member, false)
  end
  if not holder then
    -- Plain waiters may barge; fair ones only take a free lock nobody waits ahead for.
    local head = mode == 'f' and next_live_waiter()
    if not head or head == member then
      redis.call('SET', lock, token, 'PX', ttl)
      return granted(member, true)
    end
  end
  -- NX keeps a waiter's place in line when it renews its lease.
  local us, ms = server_time()
  redis.call('ZADD', queue, 'NX', us, member)
  redis.call('ZADD', leases, ms + wait_ms, member)
  return {0, redis.call('PTTL', lock)}
end

local function acquire(token, ttl, mode, wait_ms)
  local member = mode .. token
  if wait_ms == 0 then
    return try_once(token, ttl, mode, member)
  end
  return try_in_line(token, ttl, mode, member, wait_ms)
end

local function release(token, leaving)
  if leaving == '1' then
    leave_queue('f' .. token)
    leave_queue('p' .. token)
  end
  if redis.call('GET', lock) ~= token then
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

local function pass(token, next_token, ttl)
  if redis.call('GET', lock) ~= token or redis.call('EXISTS', queue) == 1 then
    return 0
  end
  redis.call('SET', lock, next_token, 'PX', ttl)
  local fence, err = next_fence()
  if not fence then
    redis.call('DEL', lock)
    return err
  end
  return fence
end

local op = ARGV[1]
if op == 'acquire' then
  return acquire(ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5]))
elseif op == 'pass' then
  return pass(ARGV[2], ARGV[3], ARGV[4])
elseif op == 'release' then
  return release(ARGV[2], ARGV[3])
end
return redis.error_reply('ERR lock.lua: unknown operation ' .. tostring(op))
