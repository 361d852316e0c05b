-- A latch's stored value, as `count_down.lua`, `look.lua` and `latchkey status`
-- read it. A helper: scripts/mod.rs puts it in front of the scripts that use it.

-- The count left and the count of a latch's stored value ("<left>:<count>", as
-- count_down.lua writes it: the count from 1 to 2^40, agreed on by every caller;
-- what is left never more), or nil for anything else: another application's data.
local function stored_latch(stored)
  local left, count = string.match(stored, '^(%d+):(%d+)$')
  -- Past 13 digits a number is above 2^40 (and past 2^53 no longer exact).
  if not left or #left > 13 or #count > 13 then
    return nil
  end
  left, count = tonumber(left), tonumber(count)
  if count < 1 or count > 1099511627776 or left > count then
    return nil
  end
  return left, count
end

-- {left, count} of the latch `key`, or {-1, -1} when there is no latch (nobody
-- counted down yet, or it expired). Raises WRONGTYPE when the key holds something
-- latchkey does not write there.
local function latch_status(key)
  local stored = redis.call('GET', key)
  if not stored then
    return {-1, -1}
  end
  local left, count = stored_latch(stored)
  if not left then
    error({err = 'WRONGTYPE the latch key holds something that is not a count'})
  end
  return {left, count}
end
