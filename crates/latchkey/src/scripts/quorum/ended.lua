-- The values of a quorum lock that were released (or broken) on this node, so that a
-- request sent before the release and arriving after it (a renewal's take-back, a
-- late take, over a connection replaced in the meantime) recreates nothing. Each
-- attempt writes a value of its own (`N/` and the owner token), which is never taken
-- again once released, so a value found here is refused for good.
--
-- The list keeps the 8 values released last, for one lease after the last of them:
-- a request late by more than a lease, or behind 8 later holds, is not caught (the
-- README's "what no client can prevent").

-- Whether `value` was released here lately.
local function has_ended(ended, value)
  return redis.call('LPOS', ended, value) ~= false
end

-- Records that `value` was released here, for `ttl_ms`.
local function mark_ended(ended, value, ttl_ms)
  redis.call('LPUSH', ended, value)
  redis.call('LTRIM', ended, 0, 7)
  redis.call('PEXPIRE', ended, ttl_ms)
end
