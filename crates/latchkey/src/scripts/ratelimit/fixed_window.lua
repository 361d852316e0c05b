-- One fixed-window rate-limit decision.
--
-- KEYS[1]  the window's counter (a string: calls counted in this window).
-- ARGV[1]  the limit per window.
-- ARGV[2]  the window length in ms.
-- ARGV[3]  the cost of this call (at least 1, at most the limit).
-- ARGV[4]  1 to count the call if it is allowed, 0 to only look (peek: no writes).
--
-- Returns {allowed (1/0), remaining, µs until a retry can pass (-1 when allowed),
-- µs until the window resets}.
--
-- A window starts at its first allowed call. A denied call is not counted, so a
-- caller hammering a closed window does not keep it closed. The count and the
-- window's expiry are written by one SET, so a crash can never leave a counter that
-- never expires (the INCR-then-EXPIRE bug). Needs clock.lua (is_count).

local limit = tonumber(ARGV[1])
local window_ms = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])

local consume = ARGV[4] == '1'
local count = tonumber(redis.call('GET', KEYS[1]) or '0')
-- Not a count: someone else wrote the key ('-5' would add room, 'nan' lift the
-- limit).
if not is_count(count) then
  return redis.error_reply('WRONGTYPE the rate limit key holds something that is not a count')
end
local left_ms = redis.call('PTTL', KEYS[1])
if left_ms == -1 then
  -- A counter some other writer left without expiry: its window ends one window
  -- from now, so it cannot live forever (set by a call that counts; a peek writes
  -- nothing).
  if consume then
    redis.call('PEXPIRE', KEYS[1], window_ms)
  end
  left_ms = window_ms
elseif left_ms == 0 then
  -- Expiring this very ms: that window is over.
  count, left_ms = 0, -2
end

if count + cost > limit then
  return {0, limit - count, left_ms * 1000, left_ms * 1000}
end
if not consume then
  return {1, limit - count, -1, math.max(left_ms, 0) * 1000}
end
if left_ms < 0 then
  -- The first call of a window starts it.
  left_ms = window_ms
end
count = count + cost
redis.call('SET', KEYS[1], count, 'PX', left_ms)
return {1, limit - count, -1, left_ms * 1000}
