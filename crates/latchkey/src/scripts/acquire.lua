-- Take a lock in one round trip.
--
-- KEYS[1]  the lock key. It holds exactly the owner token with a PX expiry: the layout
--          of the plain `SET key token NX PX ttl` pattern, so redis-py's Lock, redsync,
--          node-redlock and latchkey on the same key exclude each other.
-- KEYS[2]  the lock's fencing counter (a companion key in the same hash slot).
-- ARGV[1]  the owner token (32 hex characters: 128 bits from the OS CSPRNG).
-- ARGV[2]  the lease in milliseconds.
--
-- Returns {1, fence} when the lock was taken, {0, pttl} when someone else holds it
-- (pttl is -1 when the holder set no expiry), or a WRONGTYPE error when the key holds
-- something that is not a lock.

if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- pcall, not call: the lock key is already written, and a script error does not
  -- roll it back. If the counter is unusable we must undo the SET ourselves, or the
  -- lock would stay held with nobody holding a guard for it.
  local fence = redis.pcall('INCR', KEYS[2])
  if type(fence) == 'table' then
    redis.call('DEL', KEYS[1])
    return fence
  end
  -- The counter is lost when a server that keeps nothing on disk restarts. Flooring
  -- the token at the server clock (in microseconds) keeps it strictly increasing anyway.
  local now = redis.call('TIME')
  local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
  if fence < floor then
    fence = floor
    redis.call('SET', KEYS[2], string.format('%d', fence))
  end
  return {1, fence}
end

-- SET NX also fails on a key of another type; waiting for it would wait forever.
if redis.call('TYPE', KEYS[1]).ok ~= 'string' then
  return redis.error_reply('WRONGTYPE the lock key holds a value that is not a lock')
end
return {0, redis.call('PTTL', KEYS[1])}
