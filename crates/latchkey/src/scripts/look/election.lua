-- An election as `leader.lua` and `latchkey status` read it, without writing. A
-- helper: scripts/mod.rs puts it in front of the scripts that use it. Needs
-- election/record.lua.

-- {state, pttl, term, value} of the election whose lock is `lock` and leader record
-- `record`: state 0 when nobody holds the lock; 1 when its holder proclaimed
-- itself; 2 when it is held but its holder has not (yet) proclaimed (it just won,
-- or it is another library's holder). pttl: the lock's lease left in ms (-1: no
-- expiry, -2: free), when a crashed leader's lock is free again. Term and value are
-- '' unless state is 1.
local function election_status(lock, record)
  local holder = redis.call('GET', lock)
  if not holder then
    return {0, -2, '', ''}
  end
  local pttl = redis.call('PTTL', lock)
  local term, value = record_of(redis.call('GET', record), holder)
  if not term then
    return {2, pttl, '', ''}
  end
  return {1, pttl, term, value}
end
