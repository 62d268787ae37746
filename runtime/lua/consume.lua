-- consume.lua: jobs are done (taskflow's consume), kept in a bounded
-- history. Takes a batch: one call settles every finished job of a queue.
--
-- include: time, lease, events, deps, retention, stats
-- KEYS:  listings trash ready scheduled leases completed waiting queue tags
--        failed outbox tracked trashed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 history count limit (0 =
--        keep no history), then triples (job id, owner string, fencing
--        token ('0' = no token check)), at most 1000.
-- Effects per job whose lease is held: DEL owned and last_modified, HDEL
--        listings (taskflow's effects); lease index entry removed; the job
--        added to the history index (pruned by claim.lua; its entry is
--        what says completed, the job hash is left as it is), or deleted
--        when no history is kept; run time counted
--        in today's statistics; 'consumed' event; dependents released
--        (this queue's at once, other queues' through the outbox).
-- Returns: {'ok', status, owner, status, owner, …, outbox}, one pair per
--        job: status 'ok' | 'not_found' | 'cancelled' | 'not_owner' (owner:
--        the current owner, or ''); outbox = releases owed to other queues.

local keep = tonumber(ARGV[4])
local _, _, now_ms = now()
local out = {'ok'}
local runs = {}
local released = 0
-- One call per batch for what its jobs share: the owner keys read; the
-- owner and last_modified keys deleted, the lease index and the history
-- written.
local owned = {}
for i = 5, #ARGV - 2, 3 do owned[#owned + 1] = owned_key(ARGV[i]) end
local owners = #owned > 0 and redis.call('MGET', unpack(owned)) or {}
local gone, done = {}, {}
for i = 5, #ARGV - 2, 3 do
  local id, who, token = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local job = job_key(id)
  local v = redis.call('HMGET', job, 'token', 'claimed_at', 'dependents')
  local refused = nil
  local owner = owners[(i - 2) / 3]
  if owner ~= who or (token ~= '0' and v[1] ~= token) then
    refused = {'not_owner', owner or ''}
    if redis.call('HEXISTS', K_LISTINGS, id) == 0 then refused = unlisted(id) end
  elseif redis.call('HDEL', K_LISTINGS, id) == 0 then
    refused = unlisted(id)
  end
  if refused then
    out[#out + 1] = refused[1]
    out[#out + 1] = refused[2] or ''
  else
    gone[#gone + 1] = owned_key(id)
    gone[#gone + 1] = modified_key(id)
    done[#done + 1] = id
    if v[2] then runs[#runs + 1] = math.max(0, now_ms - tonumber(v[2])) end
    if heard(id) then publish(id, now_ms, 'consumed', {worker = who}) end
    if v[3] then released = released + release_dependents(id, now_ms) end
    -- Kept in the history, the job is known as completed by its entry
    -- in the history index, whose score is its finish time (lib/state.lua,
    -- and the readers in runtime/src/redis): its hash is not written.
    if keep == 0 then forget_job(id) end
    out[#out + 1] = 'ok'
    out[#out + 1] = ''
  end
end
if #done > 0 then
  redis.call('DEL', unpack(gone))
  redis.call('ZREM', K_LEASES, unpack(done))
  if keep > 0 then
    local history, at = {}, ms_text(now_ms)
    for _, id in ipairs(done) do
      history[#history + 1] = at
      history[#history + 1] = id
    end
    redis.call('ZADD', K_COMPLETED, unpack(history))
  end
end
add_stats('run', runs, now_ms)
if released > 0 then notify() else lease_freed() end
out[#out + 1] = redis.call('SCARD', K_OUTBOX)
return out
