-- consume.lua: jobs are done (taskflow's consume), kept in a bounded
-- history. Takes a batch: one call settles every finished job of a queue.
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 history count limit (0 = keep no history), then
--        triples (job id, owner string, fencing token ('0' = no token
--        check)), at most 1000.
-- Effects per job whose lease is held: DEL owned and last_modified, HDEL
--        listings (taskflow's effects); lease index entry removed; the job
--        hash is marked completed and added to the history (pruned by
--        claim.lua), or deleted when no history is kept.
-- Returns: {'ok', status, owner, status, owner, …}, one pair per job:
--        status 'ok' | 'not_found' | 'not_owner' (owner: the current owner,
--        or '').

local keep = tonumber(ARGV[2])
local _, _, now_ms = now()
local out = {'ok'}
for i = 3, #ARGV - 2, 3 do
  local id, who, token = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local refused = check_lease(id, who, token)
  if not refused and redis.call('HDEL', K_LISTINGS, id) == 0 then refused = {'not_found'} end
  if refused then
    out[#out + 1] = refused[1]
    out[#out + 1] = refused[2] or ''
  else
    redis.call('DEL', owned_key(id), modified_key(id))
    redis.call('ZREM', K_LEASES, id)
    local job = job_key(id)
    if keep > 0 then
      redis.call('HSET', job, 'state', 'completed', 'finished', now_ms)
      redis.call('ZADD', K_COMPLETED, now_ms, id)
    else
      redis.call('DEL', job)
    end
    out[#out + 1] = 'ok'
    out[#out + 1] = ''
  end
end
return out
