-- Several locks at once, all or none: a multi-lock's try when every lock is on one
-- server (on a cluster, in one hash slot) and none needs a fencing token with its
-- grant. Each lock is taken as take_alone.lua (or a plain SET NX PX) would take it
-- alone, but only if every one of them can be: a busy lock leaves the others
-- untouched, so a multi-lock never holds part of its set here, not even for a
-- round trip. Anything unusual (a lock already ours: an earlier try whose reply
-- was lost; a fair lock with a queue, whose head may be owed it) is left to the
-- one-by-one tries, which know how to answer it.
--
-- KEYS     the n lock keys, then their n wait queues.
-- ARGV     the n tokens, then the n ttl_ms, then n fairness flags ('f' or 'p').
--
-- Returns 0 when every lock is now ours, {i, pttl, holder} for the first one (in
-- KEYS order, 1-based) someone else holds, -1 when the tries must be one by one.

local n = #KEYS / 2
for i = 1, n do
  local holder = redis.call('GET', KEYS[i])
  if holder == ARGV[i] then
    return -1
  end
  if holder then
    return {i, redis.call('PTTL', KEYS[i]), holder}
  end
  -- EXISTS cannot fail on a key of another type (acquire.lua reports that).
  if ARGV[2 * n + i] == 'f' and redis.call('EXISTS', KEYS[n + i]) == 1 then
    return -1
  end
end
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[i], 'PX', ARGV[n + i])
end
return 0
