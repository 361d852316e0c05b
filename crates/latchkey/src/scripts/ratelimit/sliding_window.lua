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
-- ARGV[4]  1 to log the call if it is allowed, 0 to only look (peek: no writes).
--
-- Returns {allowed (1/0), remaining, µs until a retry can pass (-1 when allowed),
-- µs until the log is empty}.
--
-- Memory is bounded: only allowed calls are logged, each costs at least 1, so the
-- log never holds more than `limit` members. Entries that left the window are
-- trimmed when a call is counted (each is read once, when it leaves), and both keys
-- expire one window after the newest entry. Needs clock.lua.

local limit = tonumber(ARGV[1])
local window_us = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local consume = ARGV[4] == '1'

local now = server_time()
local gone_until = now - window_us

-- A member's sequence number and cost.
local function seq_and_cost(member)
  local seq, cost = string.match(member, '^(%d+):(%d+)$')
  return tonumber(seq), tonumber(cost)
end

local function cost_of(member)
  local _, cost = seq_and_cost(member)
  return cost
end

-- The cost in the log: the tally, or (if the tally was lost: evicted, deleted, or
-- not a count) the sum over the log itself, with the last sequence number used
-- there (nil when the tally is intact).
local function logged()
  local total = tonumber(redis.call('HGET', KEYS[2], 'total') or '')
  if is_count(total) then
    return total, nil
  end
  local sum, last_seq = 0, 0
  for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    local seq, cost = seq_and_cost(member)
    sum = sum + cost
    last_seq = math.max(last_seq, seq)
  end
  return sum, last_seq
end

-- The cost in the window: the log less the entries that left it.
local total, recounted_seq = logged()
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', gone_until)
for _, member in ipairs(gone) do
  total = total - cost_of(member)
end

-- When the newest entry leaves the window, nothing is left.
local function empty_in()
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if #newest == 0 or tonumber(newest[2]) <= gone_until then
    return 0
  end
  return tonumber(newest[2]) + window_us - now
end

if total + cost > limit then
  -- Walk the oldest live entries until enough cost has left. Each costs at least
  -- 1, so at most `total + cost - limit` (≤ cost) members are read.
  local short = total + cost - limit
  -- string.format: '..' would print the µs in floating point (%.14g) and move
  -- the bound by up to 100 µs.
  local oldest = redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%d', gone_until), '+inf', 'WITHSCORES', 'LIMIT', 0, short)
  local freed, retry = 0, window_us
  for i = 1, #oldest, 2 do
    freed = freed + cost_of(oldest[i])
    retry = tonumber(oldest[i + 1]) + window_us - now
    if freed >= short then
      break
    end
  end
  -- Never "retry now" on a refusal: a log that disagrees with its tally waits a
  -- window (retry starts at window_us and only comes down when enough will leave).
  return {0, limit - total, math.max(retry, 1), empty_in()}
end

if not consume then
  return {1, limit - total, -1, empty_in()}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', gone_until)
if recounted_seq then
  -- A lost tally: go on after the log's own numbers, so no member is overwritten.
  redis.call('HSET', KEYS[2], 'seq', string.format('%d', recounted_seq))
end
local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
-- The cost goes in as the caller's digits: a Lua number above 10^14 would be
-- printed in floating point, and cost_of could not read it back.
redis.call('ZADD', KEYS[1], now, seq .. ':' .. ARGV[3])
total = total + cost
redis.call('HSET', KEYS[2], 'total', string.format('%d', total))
local window_ms = math.ceil(window_us / 1000)
redis.call('PEXPIRE', KEYS[1], window_ms)
redis.call('PEXPIRE', KEYS[2], window_ms)
return {1, limit - total, -1, window_us}
