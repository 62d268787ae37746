-- lib/history.lua: a job's history list (events the job hash cannot tell).
-- include: keys, events

-- Events kept in one job's history.
local HISTORY_LIMIT = 100

-- Publishes an event and appends it to the job's history list.
--
-- The list holds only what the job hash cannot tell: posted (`posted`,
-- `name`), the latest claim (`token`, `claimed_at`, `claimed_by`) and
-- consumed (`finished`) are rebuilt from the hash when read, so a job that
-- simply runs once writes no list at all. The latest claim is copied into
-- the list (`logged` = its token) before any later event, so that the
-- list keeps every claim in order.
local function record(id, now_ms, event, fields)
  local h = history_key(id)
  local v = redis.call('HMGET', job_key(id), 'token', 'logged', 'claimed_at', 'claimed_by')
  if v[1] and v[1] ~= '0' and v[1] ~= v[2] and v[3] then
    -- (claim.lua marks `claimed_by` with its call, on a cluster after the
    -- process's mark: lib/claim_jobs.lua.)
    local worker = v[4] or ''
    worker = worker:match('^(.-)\n%d+!?$') or worker:match('^(.-)\n%x+%.%d+!?$') or worker
    local claim = event_json(id, tonumber(v[3]), 'claimed', {worker = worker, token = tonumber(v[1])})
    redis.call('RPUSH', h, claim)
    redis.call('HSET', job_key(id), 'logged', v[1])
  end
  local msg = event_json(id, now_ms, event, fields)
  publish(id, now_ms, event, fields, msg)
  if redis.call('RPUSH', h, msg) > HISTORY_LIMIT then redis.call('LTRIM', h, -HISTORY_LIMIT, -1) end
end
