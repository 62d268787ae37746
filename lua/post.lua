-- post.lua: posts one job (taskflow's post, plus jobworker's index).
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 job id, 3 posting head, 4 posting tail (codec::posting_parts),
--        5 priority (int), 6 max attempts, 7 delay ms (0 = none),
--        8 run-at ms since the epoch (0 = none), 9 notify channel, 10 job name
--        (kept in the job hash for history after the posting is gone).
-- Effects: INCR sequence; HSETNX listings id = head .. created_on(TIME) ..
--        tail .. sequence (taskflow's exact bytes, and taskflow's order:
--        INCR, then HSETNX); job hash; ready or scheduled index; PUBLISH
--        notify when the ready index was empty (idle workers wait on it)
--        or the job is scheduled (waiting workers re-arm their timers).
-- Returns: {'ok', sequence, state} | {'exists'} when the id is already listed.

local id = ARGV[2]
local s, us, now_ms = now()
local seq = redis.call('INCR', K_SEQUENCE)
if redis.call('HSETNX', K_LISTINGS, id, ARGV[3] .. oslo_datetime(s, us) .. ARGV[4] .. mp_uint(seq)) == 0 then
  return {'exists'}
end
local run_at = tonumber(ARGV[8])
local delay = tonumber(ARGV[7])
if delay > 0 then run_at = now_ms + delay end
local job = job_key(id)
if run_at > now_ms then
  redis.call('HSET', job, 'name', ARGV[10], 'prio', ARGV[5], 'seq', seq, 'max', ARGV[6], 'attempts', 0,
    'token', 0, 'state', 'scheduled', 'run_at', run_at)
  redis.call('ZADD', K_SCHEDULED, run_at, id)
  redis.call('PUBLISH', ARGV[9], 'scheduled')
  return {'ok', seq, 'scheduled'}
end
redis.call('HSET', job, 'name', ARGV[10], 'prio', ARGV[5], 'seq', seq, 'max', ARGV[6], 'attempts', 0, 'token', 0)
redis.call('ZADD', K_READY, (PRIO_LIMIT - tonumber(ARGV[5])) * SEQ_SPAN + seq, id)
if redis.call('ZCARD', K_READY) == 1 then redis.call('PUBLISH', ARGV[9], 'ready') end
return {'ok', seq, 'ready'}
