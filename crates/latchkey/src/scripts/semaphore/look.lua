-- Read a semaphore without writing: the weight live permits hold, how many wait,
-- the live holder whose lease ends first, and whether a given member holds a live
-- permit. Needs clock.lua.
--
-- KEYS[1]  the holders.   KEYS[2]  the wait queue.
-- ARGV[1]  a member token to look for ('' for none).
--
-- Returns {used, waiting, first holder or false, 1 if ARGV[1] holds a live permit}.
-- Only live leases count, at the server's time of reading: a crashed holder's
-- permit stops counting the moment its lease ends, whoever cleans it up.

local holders, queue, token = KEYS[1], KEYS[2], ARGV[1]
local _, now = server_time()
local used, first = 0, false
for _, member in ipairs(redis.call('ZRANGEBYSCORE', holders, '(' .. now, '+inf')) do
  used = used + tonumber(string.match(member, '^(%d+)%*'))
  first = first or member
end
local mine = 0
if token ~= '' then
  local ends = redis.call('ZSCORE', holders, token)
  if ends and tonumber(ends) > now then
    mine = 1
  end
end
return {used, redis.call('ZCARD', queue), first, mine}
