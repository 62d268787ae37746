-- retry.lua: puts trashed jobs back to work (from their failure group):
-- the posting returns from taskflow's trash to the listings, attempts
-- start again from zero.
--
-- include: time, retention, ready, stats, history, lean
-- KEYS:  listings trash ready tags failed tracked trashed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; then job ids (at most 1000).
-- Returns: {'ok', status, …}, one per job: 'ok' | 'not_found' (not in the
--        trash, or trashed outside jobworker with no job state).

local _, _, now_ms = now()
local out = {'ok'}
local any = false
for i = 4, #ARGV do
  local id = ARGV[i]
  local job = job_key(id)
  local posting = redis.call('HGET', K_TRASH, id)
  -- (A lean job taskflow trashed before a claim met it is ours by its
  -- place in the ready index: it gets its hash from the trash's copy.)
  if posting and redis.call('ZSCORE', K_READY, id) then lean_vanished(id) end
  if not posting or redis.call('EXISTS', job) == 0 then
    out[#out + 1] = 'not_found'
  else
    local group = redis.call('HGET', job, 'group')
    unfail(id)
    redis.call('HDEL', K_TRASH, id)
    redis.call('HSET', K_LISTINGS, id, posting)
    redis.call('HSET', job, 'attempts', 0)
    redis.call('HDEL', job, 'crashes', 'suspect', 'group', 'reason', 'finished', 'owner')
    make_ready(id, now_ms)
    count_stat('retried', now_ms)
    record(id, now_ms, 'retried', {from = group})
    any = true
    out[#out + 1] = 'ok'
  end
end
if any then notify() end
return out
