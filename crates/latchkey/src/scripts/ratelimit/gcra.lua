-- One GCRA decision (the generic cell rate algorithm, as redis-cell's CL.THROTTLE):
-- a steady rate of one call per emission interval, with bursts of up to
-- `burst + 1` calls.
--
-- KEYS[1]  the theoretical arrival time (TAT) in µs on the server's clock: when
--          the limiter would be back to full capacity.
-- ARGV[1]  the emission interval in µs (the period divided by the rate).
-- ARGV[2]  the delay variation tolerance in µs: emission interval × (burst + 1).
-- ARGV[3]  the cost of this call (at least 1, at most burst + 1).
-- ARGV[4]  1 to record the call if it is allowed, 0 to only look (peek).
--
-- Returns {allowed (1/0), remaining, µs until a retry can pass (-1 when allowed),
-- µs until the limiter is back to full capacity}.
--
-- All arithmetic is in integer µs (exact in a Lua number below 2^53), on the
-- server's clock, so clients with skewed clocks agree. A denied call records
-- nothing. The key expires when the limiter is full again: nothing outlives its use.

local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local increment = interval * tonumber(ARGV[3])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if not tat then
  -- Someone else wrote the key: bad data, not a failure of the script.
  return redis.error_reply('WRONGTYPE the rate limit key holds something that is not a time')
end
if tat < now then
  tat = now
end

-- Calls that still fit once `ahead` µs of capacity are spoken for.
local function remaining(ahead)
  local free = tolerance - ahead
  if free < 0 then
    return 0
  end
  return math.floor(free / interval)
end

local new_tat = tat + increment
local allow_at = new_tat - tolerance
if allow_at > now then
  return {0, remaining(tat - now), allow_at - now, tat - now}
end
if ARGV[4] == '1' then
  redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil((new_tat - now) / 1000))
  return {1, remaining(new_tat - now), -1, new_tat - now}
end
return {1, remaining(tat - now), -1, tat - now}
