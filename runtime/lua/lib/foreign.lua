-- lib/foreign.lua: jobs touched outside jobworker (taskflow's claims and
-- consumes).
-- include: keys, events, deps, lean

-- The re-check delay of claims held without an expiry (taskflow's
-- default): the lease index looks at them again after it.
local RECHECK_MS = 60000

-- A job whose listing vanished behind jobworker's back: taskflow trashed
-- it (it is in the trash) or consumed it (then it is completed, in the
-- history, and its dependents are released). `from_ready`: the id was
-- taken out of the ready index, where a lean job may be (one without a
-- job hash otherwise is not ours, or was purged).
local function listing_vanished(id, now_ms, from_ready)
  if from_ready then lean_vanished(id) end
  if redis.call('EXISTS', job_key(id)) == 0 then return end
  if redis.call('HEXISTS', K_TRASH, id) == 1 then
    redis.call('HSET', job_key(id), 'state', 'trashed')
    redis.call('ZADD', K_TRASHED, now_ms, id)
    return
  end
  local released = release_dependents(id, now_ms)
  redis.call('HSET', job_key(id), 'state', 'completed', 'finished', now_ms)
  redis.call('HDEL', job_key(id), 'owner')
  redis.call('ZADD', K_COMPLETED, now_ms, id)
  publish(id, now_ms, 'consumed', {worker = 'outside jobworker'})
  if released > 0 then notify() end
end

-- Parks a job claimed outside jobworker (taskflow) in the lease index
-- until its claim goes away.
local function park_foreign(id, now_ms)
  local ttl = redis.call('PTTL', owned_key(id))
  local deadline = now_ms + (ttl > 0 and ttl or RECHECK_MS)
  redis.call('ZADD', K_LEASES, deadline, id)
end
