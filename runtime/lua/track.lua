-- track.lua: tracks or untracks a job. Events of tracked jobs are also
-- published on their own channel (<prefix>:ev:<event>).
--
-- include: time, history, lean
-- KEYS:  tracked listings ready.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 'track' | 'untrack', 5 job
--        id.
-- Returns: {'ok'} | {'not_found'}

local mode, id = ARGV[4], ARGV[5]
adopt(id)
if redis.call('EXISTS', job_key(id)) == 0 then return {'not_found'} end
local _, _, now_ms = now()
if mode == 'track' then
  redis.call('ZADD', K_TRACKED, now_ms, id)
  record(id, now_ms, 'track')
else
  record(id, now_ms, 'untrack')
  redis.call('ZREM', K_TRACKED, id)
end
return {'ok'}
