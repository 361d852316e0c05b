-- Read a semaphore without writing: the weight live permits hold, how many wait,
-- the live holder whose lease ends first, and whether a given member holds a live
-- permit. Needs clock.lua.
--
-- KEYS[1]  the holders.   KEYS[2]  the wait queue.   KEYS[3]  the weight they hold.
-- ARGV[1]  a member token to look for ('' for none).
--
-- Returns {used, waiting, first holder or false, 1 if ARGV[1] holds a live permit}.
-- Only live leases count, at the server's time of reading: a crashed holder's
-- permit stops counting the moment its lease ends, whoever cleans it up.

local holders, queue, used, token = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local _, now = server_time()

-- The weight of the whole set (permits.lua keeps it; counted here if it was lost),
-- less the permits whose lease ended and that nobody dropped yet.
local function weight_of(member)
  return tonumber(string.match(member, '^(%d+)%*'))
end
local total = tonumber(redis.call('GET', used) or '')
if not is_count(total) then
  total = 0
  for _, member in ipairs(redis.call('ZRANGE', holders, 0, -1)) do
    total = total + weight_of(member)
  end
end
for _, member in ipairs(redis.call('ZRANGEBYSCORE', holders, '-inf', now)) do
  total = total - weight_of(member)
end

local live = redis.call('ZRANGEBYSCORE', holders, string.format('(%d', now), '+inf', 'LIMIT', 0, 1)
local mine = 0
if token ~= '' then
  local ends = redis.call('ZSCORE', holders, token)
  if ends and tonumber(ends) > now then
    mine = 1
  end
end
return {string.format('%d', math.max(total, 0)), redis.call('ZCARD', queue), live[1] or false, mine}
