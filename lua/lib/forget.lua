-- lib/forget.lua: forgetting finished jobs, and the bounded history
-- indexes (completed, cancelled) that keep them for a while.
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

-- Drops jobs of a history index (completed or cancelled) beyond its
-- count or age (at most `budget` of each per call, so the cost stays
-- bounded).
local function prune_index(index, keep, max_age, now_ms, budget)
  for _, id in ipairs(beyond(index, keep, max_age, now_ms, budget)) do
    redis.call('ZREM', index, id)
    forget_job(id)
  end
end
