-- abandon.lua: gives a claim back (taskflow's abandon), with or without
-- counting a failed attempt.
--
-- include: time, msgpack, lease, failure, history, ready, lean
-- KEYS:  listings trash ready scheduled leases queue failed tracked trashed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 job id, 5 owner string, 6 fencing token ('0' = no
--        token check), 7 mode ('release' | 'retry'), 8 retry delay ms,
--        9 error text (retry), 10 notify channel.
-- Effects: DEL owned, SET last_modified (taskflow's); for 'retry' the
--        attempt is counted and the job is scheduled after the delay, or
--        trashed with the error once its attempts are used up. Under a
--        claim made outside jobworker (token '0'), the job may still be
--        in the ready index: a lean one gets its hash first (lean.lua's
--        adopt), and a scheduled one leaves the ready index.
-- Returns: {'ok', state} (state 'ready' | 'scheduled' | 'trashed') |
--        {'not_found'} | {'cancelled'} | {'not_owner', current
--        owner or ''}

local id, who, token, mode = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local refused = check_listed_lease(id, who, token)
if refused then return refused end
local s, us, now_ms = now()
-- (The first write frees: a script without flags, past maxmemory, is
-- refused only when its first write adds data.)
redis.call('DEL', owned_key(id))
-- A claim made outside jobworker (token '0') may hold a lean job: its
-- hash gets what its post would have written before it goes back. (A
-- lease of jobworker's own claim has its hash: no look for it.)
if token == '0' then adopt(id) end
redis.call('SET', modified_key(id), oslo_datetime(s, us))
redis.call('ZREM', K_LEASES, id)
local job = job_key(id)
redis.call('HDEL', job, 'owner')
if mode == 'retry' then
  if count_attempt(id, ARGV[9], s, us, now_ms) then return {'ok', 'trashed'} end
  local delay = tonumber(ARGV[8])
  if delay > 0 then
    -- (A claim made outside jobworker left the job in the ready index.)
    if token == '0' then redis.call('ZREM', K_READY, id) end
    redis.call('ZADD', K_SCHEDULED, now_ms + delay, id)
    redis.call('HSET', job, 'state', 'scheduled', 'run_at', now_ms + delay)
    redis.call(PUBLISH, ARGV[10], 'scheduled')
    return {'ok', 'scheduled'}
  end
end
if mode ~= 'retry' then record(id, now_ms, 'abandoned', {worker = who}) end
make_ready(id, now_ms)
redis.call(PUBLISH, ARGV[10], 'ready')
return {'ok', 'ready'}
