-- A consistent snapshot of one lock, for `Mutex::status` and `Client::list`.
-- Needs look/lock.lua.
--
-- KEYS[1]  the lock key.  KEYS[2]  its fencing counter.  KEYS[3]  its wait queue.
--
-- Returns lock_status (see look/lock.lua). Reads only; WRONGTYPE if the key is not
-- a lock.

return lock_status(KEYS[1], KEYS[2], KEYS[3])
