-- A lock as `latchkey status` shows it, read without writing. A helper:
-- scripts/mod.rs puts it in front of inspect.lua and status.lua.

-- {holder or false, pttl (-2 free, -1 no expiry), last fencing token or false,
-- waiters in the queue}. WRONGTYPE if a key holds something other than a lock's.
local function lock_status(key, fence, queue)
  return {
    redis.call('GET', key) or false,
    redis.call('PTTL', key),
    redis.call('GET', fence) or false,
    redis.call('ZCARD', queue),
  }
end
