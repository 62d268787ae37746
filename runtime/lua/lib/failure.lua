-- lib/failure.lua: failed tries and the trash (failure groups, attempts).
-- include: keys, msgpack, stats, history, lean

-- The failure group of a reason: its leading "kind:" word(s), e.g.
-- "stalled", "fatal", "poison-pill"; "error" when there is none.
local function group_of(reason)
  local kind = reason:match('^([%w _%-]+):')
  if not kind then return 'error' end
  return (kind:lower():gsub('[ _]', '-'))
end

-- Moves a listed job to taskflow's trash with a reason (taskflow's key
-- effects: trash copy, last_modified set, owner and listing deleted), in
-- the failure group of the reason.
local function trash_job(id, reason, s, us, now_ms)
  -- (A lean job taskflow claimed, trashed through a lease without a
  -- token: its hash gets the post's fields first.)
  adopt(id)
  local posting = redis.call('HGET', K_LISTINGS, id)
  if posting then redis.call('HSET', K_TRASH, id, posting) end
  redis.call('SET', modified_key(id), oslo_datetime(s, us))
  redis.call('DEL', owned_key(id))
  redis.call('HDEL', K_LISTINGS, id)
  redis.call('ZREM', K_LEASES, id)
  redis.call('ZREM', K_READY, id)
  redis.call('ZREM', K_SCHEDULED, id)
  local group = group_of(reason)
  redis.call('HSET', job_key(id), 'state', 'trashed', 'reason', reason, 'group', group, 'finished', now_ms)
  redis.call('HDEL', job_key(id), 'owner')
  redis.call('ZADD', failed_key(group), now_ms, id)
  redis.call('ZINCRBY', K_FAILED, 1, group)
  redis.call('ZADD', K_TRASHED, now_ms, id)
  count_stat('failed', now_ms)
  record(id, now_ms, 'trashed', {group = group, reason = reason})
end

-- Counts a failed try; trashes the job once its attempts are used up.
-- Returns true when the job was trashed.
local function count_attempt(id, reason, s, us, now_ms)
  -- (A lean job taskflow claimed, failed through a lease without a token.)
  adopt(id)
  local job = job_key(id)
  local attempts = redis.call('HINCRBY', job, 'attempts', 1)
  local max = tonumber(redis.call('HGET', job, 'max') or LEAN_MAX)
  redis.call('HSET', job, 'reason', reason)
  record(id, now_ms, 'failed', {attempt = attempts, reason = reason})
  if attempts >= max then
    trash_job(id, reason .. ' (attempts exhausted: ' .. attempts .. ' of ' .. max .. ')', s, us, now_ms)
    return true
  end
  count_stat('retried', now_ms)
  record(id, now_ms, 'retried', {attempt = attempts})
  return false
end
