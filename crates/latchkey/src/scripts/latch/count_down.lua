-- Count a latch down by one; the count that brings it to zero opens it, once, and
-- tells every waiter. A latch that is open stays open (at zero) until its key
-- expires. Every read and check comes before the first write. Needs
-- look/latch.lua.
--
-- KEYS[1]  the latch: "<left>:<count>", with a PX expiry.
-- KEYS[2]  its pub/sub channel, where waiters listen.
-- ARGV     count (what every caller must agree on), lifetime (ms, renewed by every
--          count down), publish: 'sharded' on a cluster (SPUBLISH), else ''.
--
-- Returns {left, opened}: the count left after this call, and 1 if this call
-- opened the latch. Fails with "LKCOUNT <n>" for a latch in use with count n.

local latch, channel, count, lifetime = KEYS[1], KEYS[2], ARGV[1], ARGV[2]

local left = tonumber(count)
local stored = redis.call('GET', latch)
if stored then
  local stored_left, stored_count = stored_latch(stored)
  if not stored_left then
    return redis.error_reply('WRONGTYPE the latch key holds something that is not a count')
  end
  if stored_count ~= left then
    return redis.error_reply('LKCOUNT ' .. string.format('%d', stored_count))
  end
  left = stored_left
end
local opened = 0
if left > 0 then
  left = left - 1
  if left == 0 then
    opened = 1
  end
end
redis.call('SET', latch, string.format('%d:%s', left, count), 'PX', lifetime)
if opened == 1 then
  -- pcall: the latch is open; an ACL user without rights on the channel must not
  -- turn that into an error (waiters then see it on their timers).
  local sharded = ARGV[3] == 'sharded'
  redis.pcall(sharded and 'SPUBLISH' or 'PUBLISH', channel, '*')
end
return {left, opened}
