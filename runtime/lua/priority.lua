-- priority.lua: changes the priority of a job that has not finished. A
-- ready job moves to its new place at once (FIFO among equals is kept by
-- its sequence); others use it when they become ready. The taskflow
-- posting is never rewritten (taskflow keeps seeing the old priority).
--
-- include: time, state, ready, history, lean
-- KEYS:  listings ready scheduled leases waiting tracked completed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 job id, 5 priority.
-- Returns: {'ok', state} | {'not_found'} | {'finished', state}

local id, prio = ARGV[4], ARGV[5]
local state = state_of(id)
if not state then return {'not_found'} end
if state == 'completed' or state == 'trashed' or state == 'cancelled' then return {'finished', state} end
adopt(id)
if redis.call('EXISTS', job_key(id)) == 0 then return {'not_found'} end
redis.call('HSET', job_key(id), 'prio', prio)
if state == 'ready' then redis.call('ZADD', K_READY, ready_score(id), id) end
local _, _, now_ms = now()
record(id, now_ms, 'priority', {priority = tonumber(prio)})
return {'ok', state}
