-- A semaphore (or read-write lock) as `latchkey status` shows it, read without
-- writing. A helper: scripts/mod.rs puts it in front of status.lua. Needs
-- clock.lua's `now` passed in.

-- {permit count or false, last fencing token or false, waiters, live holders,
-- weight they hold, {member, ms left, …} for the first `limit` holders by lease
-- end}, or false when nobody holds, waits for or counts on it. Only live leases
-- count, at the server's time of reading. Members are "<weight>*<owner token>"
-- (see semaphore/permits.lua).
local function permits_status(holders, fence, queue, permits, now, limit)
  local count = redis.call('GET', permits) or false
  local waiters = redis.call('ZCARD', queue)
  local live = redis.call('ZRANGEBYSCORE', holders, string.format('(%d', now), '+inf', 'WITHSCORES')
  if not count and waiters == 0 and #live == 0 then
    return false
  end
  local weight, listed = 0, {}
  for i = 1, #live, 2 do
    weight = weight + tonumber(string.match(live[i], '^(%d+)%*'))
    if #listed < 2 * limit then
      listed[#listed + 1] = live[i]
      listed[#listed + 1] = tonumber(live[i + 1]) - now
    end
  end
  return {count, redis.call('GET', fence) or false, waiters, #live / 2,
    string.format('%d', weight), listed}
end
