-- A node's proposal for a quorum lock's fencing token. Needs clock.lua and
-- grant.lua. See docs/quorum-fencing.md.

-- The token this node proposes: above every token it proposed or carried before,
-- and at least the server clock rounded down to `step` µs, so a counter lost with
-- the node's data is made up by its clock (rounding makes nodes whose clocks agree
-- to the step propose the same token, which saves the write-back). Only reads: call
-- it before the script's first write (a counter that is not a number raises).
local function next_proposal(fence_key, step)
  local last, us = before_grant(fence_key)
  return math.max(last + 1, us - us % step)
end

-- Stores `proposal` as the node's counter, for `memory` ms after this grant.
local function store_proposal(fence_key, proposal, memory)
  redis.call('SET', fence_key, string.format('%d', proposal), 'PX', memory)
end
