-- Who leads an election, read without writing. Needs record.lua and
-- look/election.lua.
--
-- KEYS[1]  the election's lock key.   KEYS[2]  the leader record.
-- KEYS[3]  the lock's wait queue.
--
-- Returns {state, pttl, term, value, waiting} (see look/election.lua).

return election_status(KEYS[1], KEYS[2], KEYS[3])
