-- lib/state.lua: a job's state, from the indexes.
-- include: keys

-- The state of a job of this queue, from its index entries. A job
-- consumed by jobworker is known by its place in the history index
-- (consume writes no state into the job hash); one consumed by an older
-- jobworker, or found consumed by taskflow, also by its recorded state.
local function state_of(id)
  if redis.call('ZSCORE', K_READY, id) then return 'ready' end
  if redis.call('ZSCORE', K_LEASES, id) then return 'claimed' end
  if redis.call('ZSCORE', K_SCHEDULED, id) then return 'scheduled' end
  if redis.call('ZSCORE', K_WAITING, id) then return 'waiting' end
  if redis.call('ZSCORE', K_COMPLETED, id) then return 'completed' end
  local state = redis.call('HGET', job_key(id), 'state')
  if state then return state end
  if redis.call('HEXISTS', K_LISTINGS, id) == 1 then return 'ready' end
  return nil
end
