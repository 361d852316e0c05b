-- Withdraw a leader record after its leader released the lock, and tell every
-- observer. Needs record.lua.
--
-- KEYS[1]  the leader record.   KEYS[2]  the record's pub/sub channel.
-- ARGV     owner token, publish: 'sharded' on a cluster, else ''.
--
-- Returns 1 if the record was this leader's (and is gone), else 0: a successor may
-- have proclaimed already, and its record stays. Observers are told either way:
-- the lock is gone, which they see only by reading.

local withdrawn = 0
if record_of(redis.call('GET', KEYS[1]), ARGV[1]) then
  redis.call('DEL', KEYS[1])
  withdrawn = 1
end
announce(KEYS[2], ARGV[2])
return withdrawn
