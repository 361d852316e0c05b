-- A consistent snapshot of one lock, for `latchkey status` and `latchkey list`.
--
-- KEYS[1]  the lock key.  KEYS[2]  its fencing counter.  KEYS[3]  its wait queue.
--
-- Returns {holder or nil, pttl (-2 free, -1 no expiry), last fencing token or nil,
-- waiters in the queue}. Reads only; WRONGTYPE if the key is not a lock.

return {
  redis.call('GET', KEYS[1]) or false,
  redis.call('PTTL', KEYS[1]),
  redis.call('GET', KEYS[2]) or false,
  redis.call('ZCARD', KEYS[3]),
}
