-- lib/retention.lua: what is kept of finished jobs, and dropping it: the
-- completed history, the trash and its failure groups.
-- include: keys, tags

-- Deletes everything jobworker keeps about a finished job.
local function forget_job(id)
  for _, tag in ipairs(tags_of(id)) do
    redis.call('ZREM', tag_key(tag), id)
    if tonumber(redis.call('ZINCRBY', K_TAGS, -1, tag)) <= 0 then redis.call('ZREM', K_TAGS, tag) end
  end
  redis.call('ZREM', K_TRACKED, id)
  redis.call('DEL', job_key(id), history_key(id), deps_key(id), dependents_key(id))
end

-- Takes a job out of its failure group and the trash's retention index
-- (retry and purge).
local function unfail(id)
  local group = redis.call('HGET', job_key(id), 'group')
  if group then
    redis.call('ZREM', failed_key(group), id)
    if tonumber(redis.call('ZINCRBY', K_FAILED, -1, group)) <= 0 then redis.call('ZREM', K_FAILED, group) end
  end
  redis.call('ZREM', K_TRASHED, id)
end

-- Deletes a trashed job for good: taskflow's trash entry and every piece
-- of jobworker state. False when it is not in the trash.
local function purge_trashed(id)
  if redis.call('HDEL', K_TRASH, id) == 0 then
    redis.call('ZREM', K_TRASHED, id)
    return false
  end
  unfail(id)
  redis.call('DEL', modified_key(id))
  forget_job(id)
  return true
end

-- The oldest members of a retention index (zset member → time) beyond
-- `keep` of them or older than `max_age`: at most `budget` of each.
local function beyond(index, keep, max_age, now_ms, budget)
  local old = redis.call('ZRANGEBYSCORE', index, '-inf', now_ms - max_age, 'LIMIT', 0, budget)
  local excess = redis.call('ZCARD', index) - keep - #old
  if excess > 0 then
    for _, id in ipairs(redis.call('ZRANGE', index, #old, #old + math.min(excess, budget) - 1)) do
      old[#old + 1] = id
    end
  end
  return old
end

-- Drops trashed jobs beyond the trash's count or age (at most `budget` per
-- call, oldest first, so the cost stays bounded). Only jobs that are still
-- trashed go; an index entry of a job that lives again is dropped alone.
local function prune_trash(keep, max_age, now_ms, budget)
  for _, id in ipairs(beyond(K_TRASHED, keep, max_age, now_ms, budget)) do
    if redis.call('HGET', job_key(id), 'state') == 'trashed' then
      purge_trashed(id)
    else
      redis.call('ZREM', K_TRASHED, id)
    end
  end
end

-- Drops completed jobs beyond the history's count or age (at most
-- `budget` of each per call, so the cost stays bounded).
local function prune_history(keep, max_age, now_ms, budget)
  for _, id in ipairs(beyond(K_COMPLETED, keep, max_age, now_ms, budget)) do
    redis.call('ZREM', K_COMPLETED, id)
    forget_job(id)
  end
end
