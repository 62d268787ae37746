-- consume.lua: the job is done (taskflow's consume), kept in a bounded
-- history.
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 job id, 3 owner string, 4 fencing token ('0' = no
--        token check), 5 history count limit (0 = keep no history),
--        6 history age limit ms.
-- Effects: DEL owned and last_modified, HDEL listings (taskflow's order);
--        lease index entry removed; job hash marked completed and added to
--        the history, whose oldest entries beyond either limit are pruned
--        (at most 4 per call, so the cost stays bounded).
-- Returns: {'ok'} | {'not_found'} | {'not_owner', current owner or ''}

local id, who, token = ARGV[2], ARGV[3], ARGV[4]
local refused = check_lease(id, who, token)
if refused then return refused end
local keep, max_age = tonumber(ARGV[5]), tonumber(ARGV[6])
local _, _, now_ms = now()
redis.call('DEL', owned_key(id), modified_key(id))
redis.call('HDEL', K_LISTINGS, id)
redis.call('ZREM', K_LEASES, id)
local job = job_key(id)
if keep > 0 then
  redis.call('HSET', job, 'state', 'completed', 'finished', now_ms)
  redis.call('HDEL', job, 'owner')
  redis.call('ZADD', K_COMPLETED, now_ms, id)
  local old = redis.call('ZRANGEBYSCORE', K_COMPLETED, '-inf', now_ms - max_age, 'LIMIT', 0, 2)
  local excess = redis.call('ZCARD', K_COMPLETED) - keep
  if excess > 0 then
    for _, gone in ipairs(redis.call('ZRANGE', K_COMPLETED, 0, math.min(excess, 2) - 1)) do
      old[#old + 1] = gone
    end
  end
  for _, gone in ipairs(old) do
    redis.call('ZREM', K_COMPLETED, gone)
    redis.call('DEL', job_key(gone))
  end
else
  redis.call('DEL', job)
end
return {'ok'}
