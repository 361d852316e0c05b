-- An election as `leader.lua` and `latchkey status` read it, without writing. A
-- helper: scripts/mod.rs puts it in front of the scripts that use it. Needs
-- election/record.lua.

-- {state, pttl, term, value, waiting} of the election whose lock is `lock` and
-- leader record `record`: state 0 when nobody holds the lock; 1 when its holder
-- proclaimed itself; 2 when it is held but its holder has not (yet) proclaimed (it
-- just won, or it is another library's holder). pttl: the lock's lease left in ms
-- (-1: no expiry, -2: free), when a crashed leader's lock is free again. Term and
-- value are '' unless state is 1. waiting: the candidates in line in the lock's
-- queue `queue` (0 without one).
local function election_status(lock, record, queue)
  local waiting = queue and redis.call('ZCARD', queue) or 0
  local holder = redis.call('GET', lock)
  if not holder then
    -- Nobody leads, but the record of the last term stays: read all the same, so
    -- that one of another type raises WRONGTYPE here.
    redis.call('GET', record)
    return {0, -2, '', '', waiting}
  end
  local pttl = redis.call('PTTL', lock)
  local term, value = record_of(redis.call('GET', record), holder)
  if not term then
    return {2, pttl, '', '', waiting}
  end
  return {1, pttl, term, value, waiting}
end
