-- post.lua: posts one job (taskflow's post, plus jobworker's index).
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 job id, 3 posting head, 4 posting tail (codec::posting_parts),
--        5 priority (int), 6 max attempts, 7 delay ms (0 = none),
--        8 run-at ms since the epoch (0 = none), 9 notify channel, 10 job name
--        (kept in the job hash for history after the posting is gone).
-- Effects: INCR sequence; HSETNX listings id = head .. created_on(TIME) ..
--        tail .. sequence (taskflow's exact bytes); job hash; ready or
--        scheduled index; PUBLISH notify.
-- Returns: {'ok', sequence, state} | {'exists'} when the id is already listed.

local id = ARGV[2]
if redis.call('HEXISTS', K_LISTINGS, id) == 1 then return {'exists'} end
local s, us, now_ms = now()
local seq = redis.call('INCR', K_SEQUENCE)
redis.call('HSET', K_LISTINGS, id, ARGV[3] .. oslo_datetime(s, us) .. ARGV[4] .. mp_uint(seq))
local run_at = tonumber(ARGV[8])
local delay = tonumber(ARGV[7])
if delay > 0 then run_at = now_ms + delay end
local job = job_key(id)
redis.call('HSET', job, 'name', ARGV[10], 'prio', ARGV[5], 'seq', seq, 'max', ARGV[6], 'attempts', 0,
  'token', 0)
local state = 'ready'
if run_at > now_ms then
  state = 'scheduled'
  redis.call('ZADD', K_SCHEDULED, run_at, id)
  redis.call('HSET', job, 'state', state, 'run_at', run_at)
else
  make_ready(id)
end
redis.call('PUBLISH', ARGV[9], state)
return {'ok', seq, state}
