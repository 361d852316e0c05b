-- Read a latch without writing.
--
-- KEYS[1]  the latch: "<left>:<count>".
--
-- Returns {left, count}, or {-1, -1} when there is no latch (nobody counted down
-- yet, or it expired).

local stored = redis.call('GET', KEYS[1])
if not stored then
  return {-1, -1}
end
local left, count = string.match(stored, '^(%d+):(%d+)$')
if not left then
  return redis.error_reply('WRONGTYPE the latch key holds something that is not a count')
end
return {tonumber(left), tonumber(count)}
