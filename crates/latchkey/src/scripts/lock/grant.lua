-- Granting a lock, and the two replies to a try: granted or busy. Needs clock.lua.
--
-- A script that fails halfway is not rolled back, so what a grant must read, and
-- what can fail (a counter that is not a number, a TIME the ACL forbids), is read by
-- `before_grant` before the script's first write; `grant` itself only writes.

-- The last fencing token handed out (0 if the counter is gone). Raises if the
-- counter holds something that is not a count (see is_count).
local function last_fence(fence_key)
  local stored = redis.call('GET', fence_key)
  if not stored then
    return 0
  end
  local last = tonumber(stored)
  if not is_count(last) then
    error({err = 'ERR the fencing counter ' .. fence_key .. ' is not a count below 2^53; delete it'})
  end
  return last
end

-- What a grant reads: the last fencing token and the server clock (µs). Call it
-- before the script's first write. `fence_key` false: a grant without a token
-- (fencing on demand), which reads no counter (last 0).
local function before_grant(fence_key)
  local last = fence_key and last_fence(fence_key) or 0
  local us = server_time()
  return last, us
end

-- Makes `lock` `token`'s for `ttl` ms (a fresh take, or a claim of a lock that
-- holds `token` already: a release handed it over, or an earlier request with this
-- token whose reply was lost set it) and hands out the next fencing token:
-- max(last + 1, server time in µs), on every grant. A counter restored older than it
-- was (an RDB snapshot, an AOF that lost its tail, a replica that missed writes) or
-- lost altogether still yields a token above every earlier one, as long as the server
-- clock never steps back past the last token. So the counter may expire with the
-- lease it fenced (`ttl` ms; nil: a lease without end). `last` and `us` come from
-- `before_grant`.
local function next_fence(fence_key, ttl, last, us)
  local fence = math.max(last + 1, us)
  if ttl then
    redis.call('SET', fence_key, string.format('%d', fence), 'PX', ttl)
  else
    redis.call('SET', fence_key, string.format('%d', fence))
  end
  return fence
end

-- `fence_key` false: no token now (0), the holder asks for it when it needs it
-- (fence.lua).
local function grant(lock, fence_key, token, ttl, last, us)
  redis.call('SET', lock, token, 'PX', ttl)
  if not fence_key then
    return 0
  end
  return next_fence(fence_key, ttl, last, us)
end

-- The replies to a try: the lock is ours with this fence (0: none yet, fenced on
-- demand; `waiting` others are queued, so a task of our process gets it only by a
-- bounded pass ahead), or it is not: {0, pttl, holder, floor, lease_end}, pttl -1
-- when held without expiry, -2 when free but owed to a fair waiter (and then no
-- holder). The holder lets the
-- caller say who holds it, and tell another library's holder, whose release wakes
-- nobody. From a try that queued (else 0): `floor` is below every fencing token
-- granted after this try, and below the server clock (µs) at every later handover
-- (what a handover without a token sends instead), so a wake-up handing the waiter
-- a number at or below it comes from a handover that happened before, whose lock
-- has been lost since;
-- `lease_end` is when the waiter lease this try set ends (server ms), so a wake-up
-- from a release that saw an older end (a server restored from older state) is
-- not trusted either.
local function granted(fence, waiting)
  return {1, fence, false, waiting or 0, 0}
end

local function busy(lock, holder, floor, lease_end)
  return {0, redis.call('PTTL', lock), holder or false, floor or 0, lease_end or 0}
end
