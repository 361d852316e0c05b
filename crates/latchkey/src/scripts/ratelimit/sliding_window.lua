-- One exact sliding-window decision: at most `limit` cost units in any window of
-- the given length, ending now.
--
-- KEYS[1]  the log: a sorted set of allowed calls, scored by their time in µs; each
--          member is "<sequence>:<cost>".
-- KEYS[2]  the log's tally: a hash with `total` (cost units in the log) and `seq`
--          (the last sequence number, which keeps members distinct).
-- ARGV[1]  the limit per window.
-- ARGV[2]  the window length in µs.
-- ARGV[3]  the cost of this call (at least 1, at most the limit).
-- ARGV[4]  1 to log the call if it is allowed, 0 to only look (peek).
--
-- Returns {allowed (1/0), remaining, µs until a retry can pass (-1 when allowed),
-- µs until the log is empty}.
--
-- Memory is bounded: only allowed calls are logged, each costs at least 1, so the
-- log never holds more than `limit` members. Entries that left the window are
-- trimmed on every call (each is read once, when it leaves), and both keys expire
-- one window after the newest entry.

local limit = tonumber(ARGV[1])
local window_us = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- The cost a member carries, after its sequence number.
local function cost_of(member)
  return tonumber(string.match(member, ':(%d+)$'))
end

local total = tonumber(redis.call('HGET', KEYS[2], 'total') or '0')
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - window_us)
if #gone > 0 then
  for _, member in ipairs(gone) do
    total = total - cost_of(member)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window_us)
  redis.call('HSET', KEYS[2], 'total', total)
end

-- When the newest entry leaves the window, nothing is left.
local function empty_in()
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if #newest == 0 then
    return 0
  end
  return tonumber(newest[2]) + window_us - now
end

if total + cost > limit then
  -- Walk the oldest entries until enough cost has left. Each costs at least 1, so
  -- at most `total + cost - limit` (≤ cost) members are read.
  local short = total + cost - limit
  local oldest = redis.call('ZRANGE', KEYS[1], 0, short - 1, 'WITHSCORES')
  local freed, retry = 0, 0
  for i = 1, #oldest, 2 do
    freed = freed + cost_of(oldest[i])
    retry = tonumber(oldest[i + 1]) + window_us - now
    if freed >= short then
      break
    end
  end
  return {0, limit - total, retry, empty_in()}
end

if ARGV[4] ~= '1' then
  return {1, limit - total, -1, empty_in()}
end
local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
redis.call('ZADD', KEYS[1], now, seq .. ':' .. cost)
total = redis.call('HINCRBY', KEYS[2], 'total', cost)
local window_ms = math.ceil(window_us / 1000)
redis.call('PEXPIRE', KEYS[1], window_ms)
redis.call('PEXPIRE', KEYS[2], window_ms)
return {1, limit - total, -1, window_us}
