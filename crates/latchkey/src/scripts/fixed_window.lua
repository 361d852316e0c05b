-- One fixed-window rate-limit decision: count this call in the current window.
--
-- KEYS[1]  the window's counter.
-- ARGV[1]  the window length in ms.
--
-- Returns {calls in this window including this one, ms until the window ends}.
-- The first call of a window starts its expiry, in the same step as the count, so a
-- crash can never leave a counter that never expires (the INCR-then-EXPIRE bug).

local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  -- A counter left without expiry by some other writer: give it one now.
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return {count, left}
