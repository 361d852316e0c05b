-- Expiry shared by the scripts whose companion keys must outlive every lease or
-- waiter lease in them. (PTTL then PEXPIRE, not `PEXPIRE … GT`: GT needs Redis 7.0.)

-- Makes `key` live at least `ms` more (a queue outlives every waiter lease in it,
-- the holders every permit's lease).
local function keep_at_least(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end
