-- The leader record: "<SHA-1 of the leader's owner token>:<term>:<value>". The
-- SHA-1, not the token, so that reading the record never hands a reader what it
-- would need to release or extend the leader's lock. Observers listen on the
-- record's own channel, apart from the candidates waiting for the lock.

-- The term and value of `record` if it was written by the holder of the lock whose
-- owner token is `holder`; nil otherwise (no record, or one left by a leader whose
-- lock is gone).
local function record_of(record, holder)
  if not record or not holder then
    return nil
  end
  local sha, term, value = string.match(record, '^(%x+):(%d+):(.*)$')
  if sha ~= redis.sha1hex(holder) then
    return nil
  end
  return term, value
end

-- Tells every observer on `channel` that the leader may have changed ('*' wakes
-- every listener); `publish` is 'sharded' on a cluster (SPUBLISH). pcall: the
-- change has happened; an ACL user without rights on the channel must not turn it
-- into an error (observers then see it on their timers).
local function announce(channel, publish)
  local sharded = publish == 'sharded'
  redis.pcall(sharded and 'SPUBLISH' or 'PUBLISH', channel, '*')
end
