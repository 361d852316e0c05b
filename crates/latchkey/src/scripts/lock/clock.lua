-- The server clock, for the lock scripts that hand out fencing tokens or judge
-- waiter leases.
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
