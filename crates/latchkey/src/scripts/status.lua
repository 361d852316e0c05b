-- Everything latchkey keeps under one name, read at once and without writing, for
-- `latchkey status` and `latchkey list`. Needs clock.lua, look/lock.lua,
-- look/permits.lua, election/record.lua, look/election.lua and look/latch.lua.
--
-- KEYS[1..3]    the lock, its fencing counter, its wait queue.
-- KEYS[4..7]    a semaphore of the name: its holders, fencing counter, wait queue
--               and stored permit count.
-- KEYS[8..11]   the same for a read-write lock of the name.
-- KEYS[12..16]  a rate limiter's state, one key per algorithm: fixed window,
--               cooldown, sliding window (log, tally), GCRA.
-- KEYS[17..18]  an election of the name: its lock and its leader record.
-- KEYS[19]      a latch of the name.
-- KEYS[20]      the election's wait queue (its candidates in line).
-- ARGV[1]       the most holders of a semaphore or read-write lock to list.
-- ARGV[2..6]    the algorithm whose state each of KEYS[12..16] holds, and
-- ARGV[7..11]   the Redis type latchkey keeps there (key.rs's table).
--
-- Returns {lock, semaphore, read-write lock, rate limits, election, latch}:
--   lock         lock_status (look/lock.lua), or false when a key of it holds another
--                type (another application's data, not a lock);
--   semaphore,   permits_status (look/permits.lua), or false (also when a key of it
--   rw lock      holds another type: one foreign key hides one primitive, not the name)
--   rate limits  {algorithm, ms until its state expires, used, …} for each
--                algorithm with state (switching algorithms leaves the old state to
--                expire). `used`: cost units counted now (a fixed window's count,
--                the sliding log's total, 1 in a cooldown), or for GCRA how far
--                its TAT is ahead of the server clock, in µs; -1 if unreadable.
--                A key of another type or content than latchkey writes there is
--                left out;
--   election     election_status (look/election.lua), or false when its keys hold
--                another type;
--   latch        latch_status (look/latch.lua), or false when its key holds
--                something that is not a count;
--   foreign      the keys of the primitives left out above for another
--                application's data in them (a primitive's first key: which of
--                its keys has the other type, TYPE tells).

local now_us, now = server_time()
local limit = tonumber(ARGV[1])

-- Raises again an error a read met, unless it was another application's data: a
-- key of another type (WRONGTYPE), or content the read could not use (an error of
-- the script's own Lua: "user_script:12: attempt to …"). Anything else Redis
-- refused (an ACL user without a command: "ERR The user executing the script
-- can't run this command" on Redis 7.0, "@user_script: 216: The user …" on 6.x)
-- would refuse every name alike: it must fail the look, not pass for "nothing
-- here". (Redis 7.0 gives errors as strings; later ones as tables.)
local function raise_unless_foreign(err)
  local message = type(err) == 'table' and tostring(err.err) or tostring(err)
  if not string.find(message, 'WRONGTYPE', 1, true)
      and not string.find(message, '^user_script:%d+:') then
    error(err, 0)
  end
end

local foreign = {}

-- The primitive `read` returns from its keys (the first of them first), or false
-- if one of them holds another type: that first key is then counted foreign.
local function unless_foreign(read, first, ...)
  local ok, found = pcall(read, first, ...)
  if ok then
    return found
  end
  raise_unless_foreign(found)
  foreign[#foreign + 1] = first
  return false
end

local lock = false
local lock_type = redis.call('TYPE', KEYS[1])['ok']
if lock_type == 'string' or lock_type == 'none' then
  lock = unless_foreign(lock_status, KEYS[1], KEYS[2], KEYS[3])
else
  foreign[#foreign + 1] = KEYS[1]
end

-- What each algorithm's state says is used now (see above), or nil when its key
-- holds what latchkey does not write there: another application's data hides that
-- algorithm, not the name (and a reset leaves it alone). pcall: a key of the
-- sliding window's pair another application overwrote reads as unreadable.
local used_by = {
  fixed = function(key)
    local count = tonumber(redis.call('GET', key))
    return is_count(count) and count or nil
  end,
  cooldown = function() return 1 end,
  sliding = function() return tonumber(redis.call('HGET', KEYS[15], 'total')) or -1 end,
  gcra = function(key)
    local tat = tonumber(string.match(redis.call('GET', key), '^%d+$'))
    if not is_count(tat) then
      return nil
    end
    return math.max(0, tat - now_us)
  end,
}

local rates = {}
for i = 1, 5 do
  local key, algorithm, kept = KEYS[11 + i], ARGV[1 + i], ARGV[6 + i]
  local pttl = redis.call('PTTL', key)
  -- The sliding window's log and tally count once.
  if pttl ~= -2 and rates[#rates - 2] ~= algorithm then
    local used
    if redis.call('TYPE', key)['ok'] == kept then
      local ok
      ok, used = pcall(used_by[algorithm], key)
      if not ok then
        raise_unless_foreign(used)
        used = -1
      end
    end
    if used then
      rates[#rates + 1] = algorithm
      rates[#rates + 1] = pttl
      rates[#rates + 1] = used
    else
      foreign[#foreign + 1] = key
    end
  end
end

return {
  lock,
  unless_foreign(permits_status, KEYS[4], KEYS[5], KEYS[6], KEYS[7], now, limit),
  unless_foreign(permits_status, KEYS[8], KEYS[9], KEYS[10], KEYS[11], now, limit),
  rates,
  unless_foreign(election_status, KEYS[17], KEYS[18], KEYS[20]),
  unless_foreign(latch_status, KEYS[19]),
  foreign,
}
