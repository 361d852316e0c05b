-- A server clock jumping forward, as seen by the holds: every lease in KEYS ends
-- ARGV[1] ms sooner, at once and with no release (so no wake-up), as if that much
-- time had passed in a moment. A lock key's expiry shrinks (one that had less
-- left is gone); a semaphore's or read-write lock's permits (a sorted set scored by
-- lease end, server ms) end that much sooner. The server's TIME is not moved:
-- libfaketime cannot run redis-server here (docs/reliability.md), and a forward
-- jump of TIME only makes the time-based fencing tokens jump too.
--
-- KEYS    the lock keys or holders sets to jump.
-- ARGV[1] the jump, ms.
--
-- Returns how many leases it ended.

local jump = tonumber(ARGV[1])
local ended = 0
for _, key in ipairs(KEYS) do
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'string' then
    local left = redis.call('PTTL', key)
    if left > 0 then
      if left <= jump then
        redis.call('DEL', key)
        ended = ended + 1
      else
        redis.call('PEXPIRE', key, left - jump)
      end
    end
  elseif kind == 'zset' then
    local now = redis.call('TIME')
    local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
    local members = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
    for i = 1, #members, 2 do
      local ends = tonumber(members[i + 1])
      if ends > now_ms and ends - jump <= now_ms then
        ended = ended + 1
      end
      redis.call('ZADD', key, 'XX', ends - jump, members[i])
    end
  end
end
return ended
