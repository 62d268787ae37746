-- lib/ready.lua: the ready index (priority, then FIFO by sequence).
-- include: keys

-- Priorities range below PRIO_LIMIT; sequences below SEQ_SPAN.
local PRIO_LIMIT = 1048576
local SEQ_SPAN = 4294967296

-- The place of priority `prio` and sequence `seq`: higher priority first,
-- then FIFO by sequence. (The default priority, '0', is not parsed: a
-- number read from text costs a strtod.)
local function ready_order(prio, seq)
  local p = (not prio or prio == '0') and 0 or tonumber(prio)
  return (PRIO_LIMIT - p) * SEQ_SPAN + tonumber(seq or 0)
end

-- Ready-index score of a job, from its hash.
local function ready_score(id)
  local v = redis.call('HMGET', job_key(id), 'prio', 'seq')
  return ready_order(v[1], v[2])
end

-- Puts a job in the ready index; `since` (ms) starts its wait time.
local function make_ready(id, since)
  redis.call('ZADD', K_READY, ready_score(id), id)
  redis.call('HSET', job_key(id), 'ready_at', since)
  redis.call('HDEL', job_key(id), 'state')
end
