-- A semaphore (or read-write lock) as `latchkey status` shows it, read without
-- writing. A helper: scripts/mod.rs puts it in front of status.lua. Needs
-- clock.lua (`is_count`, and its `now` passed in).

-- The digits of `value` if it is a count below 2^53 (a counter or a permit count),
-- else false: another application may have written anything there.
local function digits(value)
  local found = value and string.match(value, '^%d+$')
  return is_count(tonumber(found)) and found or false
end

-- {permit count or false, last fencing token or false, waiters, live holders,
-- weight they hold, {member, ms left, …} for the first `limit` holders by lease
-- end}, or false when nobody holds, waits for or counts on it. Only live leases
-- count, at the server's time of reading. Members are "<weight>*<owner token>"
-- (see semaphore/permits.lua) with a weight from 1 to below 2^53; others are
-- skipped.
local function permits_status(holders, fence, queue, permits, now, limit)
  local count = digits(redis.call('GET', permits))
  local waiters = redis.call('ZCARD', queue)
  local live = redis.call('ZRANGEBYSCORE', holders, string.format('(%d', now), '+inf', 'WITHSCORES')
  if not count and waiters == 0 and #live == 0 then
    return false
  end
  local weight, held, listed = 0, 0, {}
  for i = 1, #live, 2 do
    local w = tonumber(string.match(live[i], '^(%d+)%*.'))
    if is_count(w) and w > 0 then
      weight = weight + w
      held = held + 1
      if #listed < 2 * limit then
        listed[#listed + 1] = live[i]
        listed[#listed + 1] = tonumber(live[i + 1]) - now
      end
    end
  end
  return {count, digits(redis.call('GET', fence)), waiters, held,
    string.format('%d', weight), listed}
end
