-- Expiry shared by the scripts whose companion keys must outlive every lease or
-- waiter lease in them. (PTTL then PEXPIRE, not `PEXPIRE … GT`: GT needs Redis 7.0.)

-- Makes `key` live at least `ms` more (a queue outlives every waiter lease in it,
-- the holders every permit's lease); when it must be extended, to `to` ms (default
-- `ms`). A queue joined on every handover passes twice its waiter lease: it then
-- pays the PEXPIRE once per waiter lease, not on every join, and lives at most that
-- much longer once nobody uses it. (Not for keys that must not outlive others: a
-- semaphore's weight sum must not outlive its holders.)
local function keep_at_least(key, ms, to)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, to or ms)
  end
end
