-- One cooldown decision: at most one call per period (one SMS code per phone per
-- minute).
--
-- KEYS[1]  the cooldown marker: present, with a PX expiry, while the period runs.
-- ARGV[1]  the period in ms.
-- ARGV[2]  1 to start the period if the call is allowed, 0 to only look (peek:
--          no writes).
--
-- Returns {allowed (1/0), remaining, µs until a retry can pass (-1 when allowed),
-- µs until the cooldown ends}. SET NX PX marks and arms the expiry in one command; a
-- denied call leaves the running period as it is.

local period_ms = tonumber(ARGV[1])
local consume = ARGV[2] == '1'
local left_ms = redis.call('PTTL', KEYS[1])
if left_ms == -1 then
  -- A marker some other writer left without expiry: end it one period from now
  -- (set by a call that counts; a peek writes nothing).
  if consume then
    redis.call('PEXPIRE', KEYS[1], period_ms)
  end
  left_ms = period_ms
end
if left_ms >= 0 then
  return {0, 0, left_ms * 1000, left_ms * 1000}
end
if not consume then
  return {1, 1, -1, 0}
end
redis.call('SET', KEYS[1], '1', 'PX', period_ms)
return {1, 0, -1, period_ms * 1000}
