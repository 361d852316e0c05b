-- Hand out the fencing token of a permit granted without one (acquire_alone.lua):
-- computed when the holder first asks, only while the permit is live. Needs
-- clock.lua and grant.lua.
--
-- KEYS[1]  the holders (see permits.lua).   KEYS[2]  the fencing counter.
-- ARGV     member ("<weight>*<owner token>").
--
-- Returns the fence, or 0 when the permit is not live (any more).

local holders, fence_key = KEYS[1], KEYS[2]
local ends = tonumber(redis.call('ZSCORE', holders, ARGV[1]) or 0)
local last, us = before_grant(fence_key)
local now = math.floor(us / 1000)
if ends <= now then
  return 0
end
-- The counter lives as long as the permit it fences.
return next_fence(fence_key, ends - now, last, us)
