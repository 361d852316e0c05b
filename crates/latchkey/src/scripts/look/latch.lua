-- A latch as `look.lua` and `latchkey status` read it, without writing. A helper:
-- scripts/mod.rs puts it in front of the scripts that use it.

-- {left, count} of the latch `key` ("<left>:<count>"), or {-1, -1} when there is no
-- latch (nobody counted down yet, or it expired). Raises WRONGTYPE when the key
-- holds something that is not a count.
local function latch_status(key)
  local stored = redis.call('GET', key)
  if not stored then
    return {-1, -1}
  end
  local left, count = string.match(stored, '^(%d+):(%d+)$')
  -- A count of more than 13 digits is above 2^40, no latch's (and past 2^53 no
  -- longer exact); a garbled one within that is shown as it is.
  if not left or #left > 13 or #count > 13 then
    error({err = 'WRONGTYPE the latch key holds something that is not a count'})
  end
  return {tonumber(left), tonumber(count)}
end
