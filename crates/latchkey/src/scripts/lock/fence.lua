-- Hand out the fencing token of a hold granted without one (a plain lock's
-- uncontended take is a bare `SET NX PX`): computed only when the holder first asks.
-- Needs clock.lua and grant.lua.
--
-- Fencing on demand keeps its promise because it is computed only while the lock
-- holds the token: holds of one lock never overlap, so a token computed during a hold
-- is above every token computed during an earlier one (next_fence: the counter + 1,
-- or the server clock in µs if the counter was lost).
--
-- KEYS[1]  the lock key.   KEYS[2]  its fencing counter.
-- ARGV     token.
--
-- Returns the fence, or 0 when the lock does not hold the token (any more).

local lock, fence_key = KEYS[1], KEYS[2]
local token = ARGV[1]

if redis.call('GET', lock) ~= token then
  return 0
end
local last, us = before_grant(fence_key)
-- The counter lives as long as the lease it fences (PTTL -1: a lease made endless
-- by hand keeps its counter as long).
local pttl = redis.call('PTTL', lock)
return next_fence(fence_key, pttl > 0 and pttl or nil, last, us)
