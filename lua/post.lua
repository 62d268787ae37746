-- post.lua: posts jobs (taskflow's post, plus jobworker's index). Takes a
-- batch: bulk posts cost one call per batch.
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 notify channel, then per job 8 values: job id,
--        posting head, posting tail (codec::posting_parts), priority (int),
--        max attempts, delay ms (0 = none), run-at ms since the epoch
--        (0 = none), job name (kept in the job hash for history after the
--        posting is gone). At most 1000 jobs.
-- Effects per job: INCR sequence; HSETNX listings id = head ..
--        created_on(TIME) .. tail .. sequence (taskflow's exact bytes, in
--        taskflow's order: INCR, then HSETNX); job hash; ready or scheduled
--        index. One PUBLISH notify when the ready index was empty before
--        (idle workers wait on it) or a job is scheduled (waiting workers
--        re-arm their timers).
-- Returns: {'ok', status, sequence, …}, one pair per job: status 'ready' |
--        'scheduled' | 'exists' (the id is already listed; sequence 0).

local s, us, now_ms = now()
local created = oslo_datetime(s, us)
local was_empty = redis.call('ZCARD', K_READY) == 0
local notify = false
local out = {'ok'}
for i = 3, #ARGV - 7, 8 do
  local id, prio, max, name = ARGV[i], ARGV[i + 3], ARGV[i + 4], ARGV[i + 7]
  local seq = redis.call('INCR', K_SEQUENCE)
  if redis.call('HSETNX', K_LISTINGS, id, ARGV[i + 1] .. created .. ARGV[i + 2] .. mp_uint(seq)) == 0 then
    out[#out + 1] = 'exists'
    out[#out + 1] = 0
  else
    local run_at = tonumber(ARGV[i + 6])
    local delay = tonumber(ARGV[i + 5])
    if delay > 0 then run_at = now_ms + delay end
    local job = job_key(id)
    if run_at > now_ms then
      redis.call('HSET', job, 'name', name, 'prio', prio, 'seq', seq, 'max', max, 'attempts', 0, 'token', 0,
        'state', 'scheduled', 'run_at', run_at)
      redis.call('ZADD', K_SCHEDULED, run_at, id)
      notify = true
      out[#out + 1] = 'scheduled'
    else
      redis.call('HSET', job, 'name', name, 'prio', prio, 'seq', seq, 'max', max, 'attempts', 0, 'token', 0)
      redis.call('ZADD', K_READY, (PRIO_LIMIT - tonumber(prio)) * SEQ_SPAN + seq, id)
      notify = notify or was_empty
      out[#out + 1] = 'ready'
    end
    out[#out + 1] = seq
  end
end
if notify then redis.call('PUBLISH', ARGV[2], 'posted') end
return out
