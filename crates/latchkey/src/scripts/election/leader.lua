-- Who leads an election, read without writing. Needs record.lua and
-- look/election.lua.
--
-- KEYS[1]  the election's lock key.   KEYS[2]  the leader record.
--
-- Returns {state, pttl, term, value} (see look/election.lua).

return election_status(KEYS[1], KEYS[2])
