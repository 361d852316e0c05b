-- One GCRA decision (the generic cell rate algorithm, as redis-cell's CL.THROTTLE):
-- a steady rate of one call per emission interval, with bursts of up to
-- `burst + 1` calls.
--
-- KEYS[1]  the theoretical arrival time (TAT) in µs on the server's clock: when
--          the limiter would be back to full capacity.
-- ARGV[1]  the increment in µs: the emission interval (the period divided by the
--          rate) times the cost of this call.
-- ARGV[2]  the delay variation tolerance in µs: emission interval × (burst + 1).
-- ARGV[3]  1 to record the call if it is allowed, 0 to only look (peek).
-- ARGV[4]  the tolerance in ms, rounded up: how long the key is kept.
--
-- Returns how far ahead of the server clock the TAT is, in µs: after this call
-- when it is allowed and recorded, as it stands when allowed and only looked at,
-- and as `-(ahead) - 1` (always negative) when denied. The caller knows the
-- interval, tolerance and cost, so remaining calls, the retry delay and the reset
-- follow from this one number (ratelimit/policy.rs).
--
-- Why so spare: any GCRA on the server's clock needs TIME, GET and SET, and those
-- three calls cost the server about 38 000 instructions against 17 000 for a
-- script of one INCR (docs/benchmarks.md). Everything else is kept off the
-- server: no table in the reply, no number formatted by Redis (`%.17g`), one
-- conversion of a stored number.
--
-- All arithmetic is in integer µs (exact in a Lua number below 2^53), on the
-- server's clock, so clients with skewed clocks agree. A denied call records
-- nothing. The key lives for the tolerance after the last call it recorded: the
-- limiter is back to full capacity by then, so nothing outlives its use by more
-- than one burst.

local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]

local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then
  tat = tonumber(stored)
  if not tat or tat ~= tat then
    -- Someone else wrote the key (nan is the one number that is not itself).
    return redis.error_reply('WRONGTYPE the rate limit key holds something that is not a time')
  end
  -- Never further ahead than the tolerance, which every TAT this policy stored
  -- is: one written by hand (or under a looser policy) cannot deny for ever.
  if tat < now then
    tat = now
  elseif tat > now + ARGV[2] then
    tat = now + ARGV[2]
  end
end

local new_tat = tat + ARGV[1]
if new_tat - ARGV[2] > now then
  return now - tat - 1
end
if ARGV[3] == '1' then
  redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', ARGV[4])
  return new_tat - now
end
return tat - now
