-- Give permits back when nobody waits in line: the common release, with the fewest
-- calls. Needs clock.lua. With a line (a release must serve it) or a weight sum to
-- count again, it leaves everything to release.lua. Every read comes before the
-- first write.
--
-- KEYS[1]  the holders (see permits.lua).   KEYS[2]  the weight they hold.
-- KEYS[3]  the wait queue.
-- ARGV     member ("<weight>*<owner token>"), weight.
--
-- Returns 1 if the permits were still ours (and are now given back), 0 if not, -1
-- when release.lua must answer.

local holders, used_key = KEYS[1], KEYS[2]
if redis.call('EXISTS', KEYS[3]) == 1 then
  return -1
end
local ends = redis.call('ZSCORE', holders, ARGV[1])
if not ends then
  return 0
end
local used = tonumber(redis.call('GET', used_key) or '')
if not is_count(used) then
  return -1
end
local _, now = server_time()
redis.call('ZREM', holders, ARGV[1])
used = used - tonumber(ARGV[2])
if used > 0 then
  redis.call('SET', used_key, string.format('%d', used), 'KEEPTTL')
else
  redis.call('DEL', used_key)
end
if tonumber(ends) > now then
  return 1
end
return 0
