-- Read a latch without writing. Needs look/latch.lua.
--
-- KEYS[1]  the latch: "<left>:<count>".
--
-- Returns {left, count}, or {-1, -1} when there is no latch (nobody counted down
-- yet, or it expired).

return latch_status(KEYS[1])
