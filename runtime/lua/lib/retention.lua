-- lib/retention.lua: the trash and its failure groups: taking a job out
-- (retry), purging it, pruning the trash.
-- include: keys, tags, forget

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
-- of jobworker state, with the ready index's entry of a job taskflow
-- trashed that no claim met yet. False when it is not in the trash.
local function purge_trashed(id)
  if redis.call('HDEL', K_TRASH, id) == 0 then
    redis.call('ZREM', K_TRASHED, id)
    return false
  end
  redis.call('ZREM', K_READY, id)
  unfail(id)
  redis.call('DEL', modified_key(id))
  forget_job(id)
  return true
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
