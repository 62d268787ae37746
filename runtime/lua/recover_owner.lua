-- recover_owner.lua: gives back at once every lease a worker held,
-- instead of waiting for them to expire: a dead worker's (the supervisor's
-- crash recovery), or what a worker replaced on purpose holds unread
-- (Board::release_unread). Two steps, so that no call reads the whole
-- lease index: 'find' pages through it, then 'crash' or 'release' gives
-- back the jobs found.
--
-- include: time, msgpack, failure, ready
-- KEYS:  listings trash ready scheduled leases failed tracked trashed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 owner string of the worker, 5 crash reason
--        (e.g. "worker w0 killed by signal 9 (SIGKILL)"), 6 crashes that
--        make a job a poison pill, 7 mode: 'find', 'crash' or 'release';
--        'find': 8 ZSCAN cursor of the lease index; 'crash' and
--        'release': 8 '1' when the worker held one job alone (of all
--        that 'find' found), 9.. the job ids found.
-- 'find' returns {next cursor ('0' at the end), id, ...}: the leased
--        jobs of this page whose job hash names ARGV[4] as owner (ZSCAN
--        may return an id twice; the caller keeps one).
-- Effects per given job still in the lease index whose job hash names
--        ARGV[4] as owner: DEL owned (if still
--        ARGV[4]'s), SET last_modified, as taskflow's abandon. 'crash': an
--        attempt is counted. When the worker held that one job alone, the crash is
--        counted on it, and a job that killed its worker ARGV[6] times is
--        trashed as a poison pill. When it held several, none can be
--        blamed: each becomes a suspect, handed out alone to an idle
--        worker by claim.lua. 'release' (jobs handed to the worker that
--        it never started, and the leases a worker asked to stop could
--        not give back itself): nothing is counted, and the history says
--        abandoned, as for an abandon. Then back to ready (or the trash
--        once attempts run out); PUBLISH notify; the owner's claim record
--        is dropped.
-- Returns: {'ok', back to ready, trashed}

-- Lease-index entries one 'find' call reads at most (ZSCAN's COUNT hint).
local FIND_PAGE = 1000
local owner, reason, poison = ARGV[4], 'crashed: ' .. ARGV[5], tonumber(ARGV[6])
local function held(id)
  return redis.call('HGET', job_key(id), 'owner') == owner
end

if ARGV[7] == 'find' then
  local page = redis.call('ZSCAN', K_LEASES, ARGV[8], 'COUNT', FIND_PAGE)
  local found = {page[1]}
  local entries = page[2]
  for i = 1, #entries, 2 do
    if held(entries[i]) then found[#found + 1] = entries[i] end
  end
  return found
end

local release = ARGV[7] == 'release'
local alone = ARGV[8] == '1'
local s, us, now_ms = now()
local mine = {}
for i = 9, #ARGV do
  local id = ARGV[i]
  if redis.call('ZSCORE', K_LEASES, id) and held(id) then mine[#mine + 1] = id end
end

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
