-- lib/ready.lua: the ready index (priority, then FIFO by sequence).
-- include: keys

-- Priorities range below PRIO_LIMIT; sequences below SEQ_SPAN.
local PRIO_LIMIT = 1048576
local SEQ_SPAN = 4294967296

-- Ready-index score: higher priority first, then FIFO by sequence.
local function ready_score(id)
  local v = redis.call('HMGET', job_key(id), 'prio', 'seq')
  return (PRIO_LIMIT - tonumber(v[1] or 0)) * SEQ_SPAN + tonumber(v[2] or 0)
end

-- Puts a job in the ready index; `since` (ms) starts its wait time.
local function make_ready(id, since)
  redis.call('ZADD', K_READY, ready_score(id), id)
  redis.call('HSET', job_key(id), 'ready_at', since)
  redis.call('HDEL', job_key(id), 'state')
end
