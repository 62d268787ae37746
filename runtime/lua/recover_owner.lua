-- recover_owner.lua: gives back at once every lease a worker held,
-- instead of waiting for them to expire: a dead worker's (the supervisor's
-- crash recovery), or what a worker replaced on purpose holds unread
-- (Board::release_unread).
--
-- include: time, msgpack, failure, ready
-- KEYS:  listings trash ready scheduled leases failed tracked trashed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 owner string of the worker, 5 crash reason
--        (e.g. "worker w0 killed by signal 9 (SIGKILL)"), 6 crashes that
--        make a job a poison pill, 7 mode: 'crash' or 'release'.
-- Effects per job whose job hash names ARGV[4] as owner (found among the
--        first 10,000 entries of the lease index): DEL owned (if still
--        ARGV[4]'s), SET last_modified, as taskflow's abandon. 'crash': an
--        attempt is counted. When the worker held that one job alone, the crash is
--        counted on it, and a job that killed its worker ARGV[6] times is
--        trashed as a poison pill. When it held several, none can be
--        blamed: each becomes a suspect, handed out alone to an idle
--        worker by claim.lua. 'release' (jobs handed to the worker that
--        it never started): nothing is counted, and the history says
--        abandoned, as for an abandon. Then back to ready (or the trash
--        once attempts run out); PUBLISH notify.
-- Returns: {'ok', back to ready, trashed}

local owner, reason, poison = ARGV[4], 'crashed: ' .. ARGV[5], tonumber(ARGV[6])
local release = ARGV[7] == 'release'
local s, us, now_ms = now()
local mine = {}
for _, id in ipairs(redis.call('ZRANGE', K_LEASES, 0, 9999)) do
  if redis.call('HGET', job_key(id), 'owner') == owner then mine[#mine + 1] = id end
end
local alone = #mine == 1

-- Counts the crash on a job its worker held alone (trashed as a poison
-- pill at `poison` crashes) or makes it a suspect, and counts the
-- attempt; true when the job was trashed.
local function blame(id)
  local job = job_key(id)
  if not alone then
    redis.call('HSET', job, 'suspect', 1)
    return count_attempt(id, reason, s, us, now_ms)
  end
  local crashes = redis.call('HINCRBY', job, 'crashes', 1)
  if crashes < poison then return count_attempt(id, reason, s, us, now_ms) end
  redis.call('HINCRBY', job, 'attempts', 1)
  trash_job(id, 'poison pill: killed its worker ' .. crashes .. ' times (last: ' .. reason .. ')', s, us, now_ms)
  return true
end

local recovered, trashed = 0, 0
for _, id in ipairs(mine) do
  if redis.call('GET', owned_key(id)) == owner then redis.call('DEL', owned_key(id)) end
  redis.call('SET', modified_key(id), oslo_datetime(s, us))
  redis.call('ZREM', K_LEASES, id)
  redis.call('HDEL', job_key(id), 'owner')
  if release then record(id, now_ms, 'abandoned', {worker = owner}) end
  if not release and blame(id) then
    trashed = trashed + 1
  else
    make_ready(id, now_ms)
    recovered = recovered + 1
  end
end
-- Its record of what its last claim took is of no use any more.
redis.call('ZREM', took_key(), owner)
if recovered > 0 then notify() end
return {'ok', recovered, trashed}
