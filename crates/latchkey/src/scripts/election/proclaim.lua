-- Proclaim a leader, or keep its proclamation: the holder of an election's lock
-- writes who it is, and observers are told. The leader's keeper calls it again
-- every half lease: it then only renews the record, or writes it again if it was
-- lost (a restart, a failover, an eviction, an operator) while the lock was kept.
-- Needs record.lua.
--
-- KEYS[1]  the election's lock key.   KEYS[2]  the leader record.
-- KEYS[3]  the record's pub/sub channel, where observers listen.
-- ARGV     owner token, term, value, the record's lifetime (ms), publish:
--          'sharded' on a cluster (SPUBLISH), else '' (PUBLISH).
--
-- Returns 1 when proclaimed (observers told), 2 when the record stood and was
-- renewed, 0 when the lock is no longer ours (nothing written).

local lock, record, channel = KEYS[1], KEYS[2], KEYS[3]
local token, term, lifetime = ARGV[1], ARGV[2], ARGV[4]

if redis.call('GET', lock) ~= token then
  return 0
end
-- The record outlives the lease it was written under. One outliving its leader is
-- harmless: it counts only while its SHA-1 matches the lock's holder.
local standing = record_of(redis.call('GET', record), token)
if standing == term then
  redis.call('PEXPIRE', record, lifetime)
  return 2
end
redis.call('SET', record, redis.sha1hex(token) .. ':' .. term .. ':' .. ARGV[3], 'PX', lifetime)
announce(channel, ARGV[5])
return 1
