-- cancel.lua: cancels jobs that have not finished (ready, scheduled,
-- waiting or claimed). A claimed job's lease goes with it, and its owner
-- hears of it on <prefix>:cancel:<owner> and stops the handler (a worker
-- that misses it learns at its next heartbeat, which is refused).
--
-- include: time, state, history, lease, forget, lean
-- KEYS:  listings ready scheduled leases cancelled waiting queue tags
--        tracked completed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 '1' to cancel jobs that
--        have dependents anyway (the caller cancels those too), else '0',
--        followed by ' again <ms>' when the call is sent again because
--        its reply was lost, that long after its first sending plus a
--        margin (a job cancelled within that time is then taken as the
--        first sending's and left as it is, and the refs the first
--        sending returned for it are returned again); 5, 6 the
--        history's count and age (ms), which bound the cancelled jobs kept;
--        then job ids (at most 1000).
-- Effects: nothing unless every job can be cancelled. Then per job:
--        listing, owner, last_modified and index entries deleted; this
--        queue's dependencies forget it (those in other queues are kept
--        for ten minutes in NS:jw.cancel_refs.<id>, for a call sent
--        again); job hash marked cancelled and
--        kept in the cancelled index (pruned here by the history's count
--        and age); 'cancelled' event.
-- Returns: {'ok', ref, …} where each ref ("queue\nid\njob") is a
--        dependency in another queue that still lists a cancelled job as
--        its dependent (the caller removes it there) |
--        {'not_found', id} | {'finished', id, state} |
--        {'has_dependents', id, "queue\nid", …}

local force = ARGV[4]:sub(1, 1) == '1'
local window = tonumber(ARGV[4]:match('^%d again (%d+)$'))
local _, _, now_ms = now()
local done = {}
for i = 7, #ARGV do
  local id = ARGV[i]
  local state = state_of(id)
  if not state then return {'not_found', id} end
  if window and state == 'cancelled'
      and tonumber(redis.call('HGET', job_key(id), 'finished') or 0) >= now_ms - window then
    done[id] = true
  elseif state == 'completed' or state == 'trashed' or state == 'cancelled' then
    return {'finished', id, state}
  end
  if not force and not done[id] then
    local dependents = redis.call('SMEMBERS', dependents_key(id))
    if #dependents > 0 then
      local out = {'has_dependents', id}
      for _, ref in ipairs(dependents) do out[#out + 1] = ref end
      return out
    end
  end
end
local out = {'ok'}
for i = 7, #ARGV do
  local id = ARGV[i]
  local refs = NS .. 'jw.cancel_refs.' .. id
  if done[id] then
    for _, ref in ipairs(redis.call('SMEMBERS', refs)) do out[#out + 1] = ref end
  else
    adopt(id)
    local owner = redis.call('GET', owned_key(id))
    -- Its worker stops the handler at once (see RedisBoard::cancels_of).
    if owner then redis.call(PUBLISH, EVENTS .. ':cancel:' .. owner, id) end
    redis.call('HDEL', K_LISTINGS, id)
    redis.call('DEL', owned_key(id), modified_key(id), dependents_key(id))
    for _, k in ipairs({K_READY, K_SCHEDULED, K_LEASES, K_WAITING}) do redis.call('ZREM', k, id) end
    local me, kept = QUEUE .. '\n' .. id, false
    for _, ref in ipairs(redis.call('SMEMBERS', deps_key(id))) do
      local q, dep = ref:match('^(.-)\n(.*)$')
      if q == QUEUE then
        redis.call('SREM', dependents_key(dep), me)
      else
        out[#out + 1] = ref .. '\n' .. id
        redis.call('SADD', refs, ref .. '\n' .. id)
        kept = true
      end
    end
    if kept then redis.call('PEXPIRE', refs, 600000) end
    redis.call('DEL', deps_key(id))
    local job = job_key(id)
    redis.call('HSET', job, 'state', 'cancelled', 'finished', now_ms)
    redis.call('HDEL', job, 'owner', 'posting')
    redis.call('ZADD', K_CANCELLED, now_ms, id)
    record(id, now_ms, 'cancelled')
  end
end
lease_freed()
prune_index(K_CANCELLED, tonumber(ARGV[5]), tonumber(ARGV[6]), now_ms, #ARGV - 6 + 4)
return out
