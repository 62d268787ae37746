-- lib/forget.lua: forgetting finished jobs, and the bounded history
-- indexes (completed, cancelled) that keep them for a while.
-- include: keys, time, tags

-- Deletes everything jobworker keeps about finished jobs: their tags
-- (read only while the queue has tagged jobs), then their keys with one
-- DEL and their tracking with one ZREM.
local function forget_jobs(ids)
  if #ids == 0 then return end
  local tagged = redis.call('ZCARD', K_TAGS) > 0
  local keys = {}
  for _, id in ipairs(ids) do
    if tagged then
      for _, tag in ipairs(tags_of(id)) do
        redis.call('ZREM', tag_key(tag), id)
        if tonumber(redis.call('ZINCRBY', K_TAGS, -1, tag)) <= 0 then redis.call('ZREM', K_TAGS, tag) end
      end
    end
    keys[#keys + 1] = job_key(id)
    keys[#keys + 1] = history_key(id)
    keys[#keys + 1] = deps_key(id)
    keys[#keys + 1] = dependents_key(id)
  end
  redis.call('ZREM', K_TRACKED, unpack(ids))
  redis.call('DEL', unpack(keys))
end

-- Deletes everything jobworker keeps about a finished job.
local function forget_job(id)
  forget_jobs({id})
end

-- The oldest members of a retention index (zset member → time) beyond
-- `keep` of them or older than `max_age`: at most `budget` of each.
local function beyond(index, keep, max_age, now_ms, budget)
  local old = redis.call('ZRANGEBYSCORE', index, '-inf', int(now_ms - max_age), 'LIMIT', '0', int(budget))
  local excess = redis.call('ZCARD', index) - keep - #old
  if excess > 0 then
    for _, id in ipairs(redis.call('ZRANGE', index, #old, #old + math.min(excess, budget) - 1)) do
      old[#old + 1] = id
    end
  end
  return old
end

-- Drops jobs of a history index (completed or cancelled) beyond its
-- count or age (at most `budget` of each per call, so the cost stays
-- bounded), with one call per step for the whole batch.
local function prune_index(index, keep, max_age, now_ms, budget)
  local old = beyond(index, keep, max_age, now_ms, budget)
  if #old == 0 then return end
  redis.call('ZREM', index, unpack(old))
  forget_jobs(old)
end
