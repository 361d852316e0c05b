-- A semaphore's holders and its line. Needs clock.lua, grant.lua and queue.lua.
--
-- The holders are a sorted set: member "<weight>*<owner token>", score = when that
-- permit's lease ends (server ms). A permit is live while its score is in the
-- future, so a crashed holder's permits come back when its lease ends, with no one
-- to clean up. Waiters wait in the lock's queue (queue.lua) as fair waiters whose
-- token part is "<weight>*<owner token>". All of it is strict FIFO: a waiter that
-- does not fit blocks the ones behind it, so a large request is never starved by a
-- stream of small ones (and a writer, who asks for every permit, is never starved
-- by readers).

-- A holder's or waiter's member token: its weight and its owner token. The
-- weight goes in as the caller's digits: a Lua number above 10^14 would be
-- printed in floating point.
local function weighed(weight, owner)
  return weight .. '*' .. owner
end

-- nil for a member another writer left (no weight, a weight of 0 or past 2^53):
-- it counts for nothing and names no holder. (Not an error: most callers meet
-- members after their first write, and a script is not rolled back.)
local function weight_and_owner(token)
  local weight, owner = string.match(token, '^(%d+)%*(.+)$')
  weight = tonumber(weight)
  if not is_count(weight) or weight == 0 then
    return nil
  end
  return weight, owner
end

-- The weight of every member of the holders set (live, or ended and not yet
-- dropped) is kept beside it in `used`, so that no call reads every holder (a
-- read-write lock may have thousands of readers). If `used` was lost (evicted,
-- deleted, overwritten with something that is not a count), it is counted again
-- from the set, once. Read it before a script's first write: GET raises WRONGTYPE.
-- Returns the sum, and whether it was stored.
local function weight_sum(holders, used)
  local sum = tonumber(redis.call('GET', used) or '')
  if is_count(sum) then
    return sum, true
  end
  local total = 0
  for _, member in ipairs(redis.call('ZRANGE', holders, 0, -1)) do
    total = total + (weight_and_owner(member) or 0)
  end
  return total, false
end

-- Stores the weight sum; it lives at least `ms` more, as the holders set does.
local function store_used(used, total, ms)
  if total <= 0 then
    redis.call('DEL', used)
    return
  end
  redis.call('SET', used, string.format('%d', total), 'KEEPTTL')
  keep_at_least(used, ms)
end

-- Drops permits whose lease ended and returns the weight the live ones hold. Each
-- ended one is read once, when it is dropped.
local function live_weight(holders, used, now)
  local total, stored = weight_sum(holders, used)
  local ended = redis.call('ZRANGEBYSCORE', holders, '-inf', now)
  for _, member in ipairs(ended) do
    total = total - (weight_and_owner(member) or 0)
  end
  if #ended > 0 then
    redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  end
  if #ended > 0 or not stored then
    store_used(used, total, math.max(redis.call('PTTL', holders), 1))
  end
  return total
end

-- Gives `token` (of `weight`) a permit for `ttl` ms with the next fencing token.
-- The holders set, and the weight sum beside it, live as long as the longest lease.
local function grant_permit(holders, used, fence_key, token, weight, ttl, last, us)
  local now = math.floor(us / 1000)
  local total = weight_sum(holders, used)
  if redis.call('ZADD', holders, now + ttl, token) == 1 then
    total = total + weight
  end
  keep_at_least(holders, ttl)
  store_used(used, total, ttl)
  return next_fence(fence_key, ttl, last, us)
end

-- Serves the line: the oldest live waiters get permits, in order, while they fit.
-- Each is told on `channel` as a lock's waiter is (release.lua): the SHA-1 of its
-- owner token, its fencing token and its waiter lease's end. `caller` (a member
-- token, or nil) is not told: it learns from the reply; its fence is returned.
-- Returns the weight now held, the last fencing token handed out and the caller's
-- fence (or nil).
local function serve_line(keys, permits, used, last, us, sharded, caller)
  local holders, fence_key, queue, leases, channel = keys[1], keys[2], keys[3], keys[4], keys[5]
  local used_key = keys[6]
  local caller_fence
  while true do
    local waiter, lease_left, lease_end = next_live_waiter(queue, leases, math.floor(us / 1000))
    if not waiter then
      break
    end
    local asked, token = member_lease_and_token(waiter)
    local weight, owner = weight_and_owner(token)
    if weight and used + weight > permits then
      break
    end
    if weight then
      -- What is left of its waiter lease or the lease it asked for, whichever is
      -- shorter: a waiter that died costs no more than either. The caller is alive
      -- (it is asking): it gets its whole lease, as its reply says.
      local ttl = asked
      if token ~= caller then
        ttl = math.min(lease_left, asked)
      end
      local fence = grant_permit(holders, used_key, fence_key, token, weight, ttl, last, us)
      last = fence
      used = used + weight
      if token == caller then
        caller_fence = fence
      elseif channel then
        local told = string.format('%s:%d:%d', redis.sha1hex(owner), fence, lease_end)
        redis.pcall(sharded and 'SPUBLISH' or 'PUBLISH', channel, told)
      end
    end
    -- Served, or another writer's entry, which waits for nothing.
    leave_queue(queue, leases, waiter)
  end
  return used, last, caller_fence
end

-- The reply when no permit is free for us: {0, pttl, holder, floor, lease_end} as
-- grant.lua's busy, with pttl the time until the first live permit's lease ends
-- (when a crashed holder's permit comes back, -2 if none) and the holder of that
-- permit; no holder when enough permits are free but `owed` to waiters ahead.
local function no_permit(holders, now, owed, floor, lease_end)
  local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
  local pttl, holder = -2, false
  if first[2] then
    pttl = tonumber(first[2]) - now
    if not owed then
      local _, owner = weight_and_owner(first[1])
      holder = owner or false
    end
  end
  return {0, pttl, holder, floor or 0, lease_end or 0}
end
