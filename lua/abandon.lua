-- abandon.lua: gives a claim back (taskflow's abandon), with or without
-- counting a failed attempt.
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 job id, 3 owner string, 4 fencing token ('0' = no
--        token check), 5 mode ('release' | 'retry'), 6 retry delay ms,
--        7 error text (retry), 8 notify channel.
-- Effects: DEL owned, SET last_modified (taskflow's); for 'retry' the
--        attempt is counted and the job is scheduled after the delay, or
--        trashed with the error once its attempts are used up.
-- Returns: {'ok', state} (state 'ready' | 'scheduled' | 'trashed') |
--        {'not_found'} | {'not_owner', current owner or ''}

local id, who, token, mode = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local refused = check_listed_lease(id, who, token)
if refused then return refused end
local s, us, now_ms = now()
redis.call('DEL', owned_key(id))
redis.call('SET', modified_key(id), oslo_datetime(s, us))
redis.call('ZREM', K_LEASES, id)
local job = job_key(id)
redis.call('HDEL', job, 'owner')
if mode == 'retry' then
  if count_attempt(id, ARGV[7], s, us) then return {'ok', 'trashed'} end
  local delay = tonumber(ARGV[6])
  if delay > 0 then
    redis.call('ZADD', K_SCHEDULED, now_ms + delay, id)
    redis.call('HSET', job, 'state', 'scheduled', 'run_at', now_ms + delay)
    redis.call('PUBLISH', ARGV[8], 'scheduled')
    return {'ok', 'scheduled'}
  end
end
make_ready(id)
redis.call('PUBLISH', ARGV[8], 'ready')
return {'ok', 'ready'}
