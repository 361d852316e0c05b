-- Who leads an election, read without writing. Needs record.lua.
--
-- KEYS[1]  the election's lock key.   KEYS[2]  the leader record.
--
-- Returns {state, pttl, term, value}: state 0 when nobody holds the lock; 1 when
-- its holder proclaimed itself; 2 when it is held but its holder has not (yet)
-- proclaimed (it just won, or it is another library's holder). pttl: the lock's
-- lease left in ms (-1: no expiry, -2: free), when a crashed leader's lock is free
-- again. Term and value are '' unless state is 1.

local holder = redis.call('GET', KEYS[1])
if not holder then
  return {0, -2, '', ''}
end
local pttl = redis.call('PTTL', KEYS[1])
local term, value = record_of(redis.call('GET', KEYS[2]), holder)
if not term then
  return {2, pttl, '', ''}
end
return {1, pttl, term, value}
