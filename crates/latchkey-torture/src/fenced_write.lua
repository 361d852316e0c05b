-- The protected resource: accept a write only if its fencing token is greater than
-- every token accepted before, so a holder that stalled past its lease cannot
-- overwrite the next holder's work.
--
-- KEYS[1]  the resource's last accepted token.
-- KEYS[2]  the list of accepted tokens (for the checker).
-- ARGV[1]  the writer's fencing token.
--
-- Returns 1 (accepted) or 0 (rejected: a newer holder already wrote).

local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if token <= last then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[1])
return 1
