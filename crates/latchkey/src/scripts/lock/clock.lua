-- The server clock, for the scripts that hand out fencing tokens, judge waiter
-- leases or keep a sliding window; and what a count they read back must be.
--
-- Redis has no `require`: scripts/mod.rs puts this file, and the other helper files
-- a script needs, in front of the script at compile time. Helpers take the keys they
-- use as arguments, so each script declares only the keys it touches.

-- The server clock in µs and in ms (µs stay below 2^53, exact in a Lua number).
local function server_time()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  return us, math.floor(us / 1000)
end

-- Whether `n` (tonumber of a stored value) is a count latchkey could have written:
-- a whole number from 0 to below 2^53 (exact in a Lua number). tonumber also reads
-- '-5', 'nan', 'inf', '1e300' and '0x10', which a key set by hand may hold: a
-- fence from one would repeat or go back, a weight sum below zero would let too
-- many in.
local function is_count(n)
  return n ~= nil and n >= 0 and n < 9007199254740992 and n % 1 == 0
end
