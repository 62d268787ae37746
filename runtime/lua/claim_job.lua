-- claim_job.lua: claims one named job (taskflow's claim), whatever its
-- place in the order; a job posted by taskflow is indexed on the way.
--
-- include: time, msgpack, take, lean
-- KEYS:  listings trash ready scheduled leases completed waiting outbox
--        tracked trashed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 job id, 5 owner string, 6 expiry ms (0: no
--        expiry, held until released, as taskflow's claim without one), 7 priority, 8 sequence, 9 max attempts (used only to index a job
--        posted by taskflow), 10 when the call is sent again because its
--        reply was lost: ms since its first sending, plus a margin (else
--        '0').
-- Effects: as claim.lua for one job. A re-claim by the same owner
--        refreshes last_modified and the expiry but still reports
--        'claimed', exactly as taskflow does; sent again, a claim by the
--        same owner within that time is the first sending's, and the job
--        is returned as a claim would have (its lease renewed from now).
-- Returns: {'ok', posting, token, attempts, max, prio} | {'not_found'} |
--        {'claimed', owner}

local id, who, expiry_ms = ARGV[4], ARGV[5], tonumber(ARGV[6])
local posting = redis.call('HGET', K_LISTINGS, id)
if not posting then return {'not_found'} end
local s, us, now_ms = now()
local owner = redis.call('GET', owned_key(id))
local job = job_key(id)
if owner then
  if owner == who then
    redis.call('SET', modified_key(id), oslo_datetime(s, us))
    if expiry_ms > 0 then redis.call('PEXPIRE', owned_key(id), expiry_ms) end
    local window = tonumber(ARGV[10])
    local v = window > 0 and redis.call('HMGET', job, 'claimed_at', 'token', 'attempts', 'max', 'prio')
    if v and tonumber(v[1] or 0) >= now_ms - window then
      redis.call('ZADD', K_LEASES, now_ms + (expiry_ms > 0 and expiry_ms or RECHECK_MS), id)
      return {'ok', posting, tonumber(v[2] or 0), tonumber(v[3] or 0), tonumber(v[4] or LEAN_MAX), tonumber(v[5] or 0)}
    end
  end
  return {'claimed', owner}
end
adopt(id)
if redis.call('EXISTS', job) == 0 then
  redis.call('HSET', job, 'prio', ARGV[7], 'seq', ARGV[8], 'max', ARGV[9], 'attempts', 0, 'token', 0)
end
redis.call('ZREM', K_READY, id)
redis.call('ZREM', K_SCHEDULED, id)
local token = take(id, who, expiry_ms, s, us, now_ms)
local v = redis.call('HMGET', job, 'attempts', 'max', 'prio')
return {'ok', posting, token, tonumber(v[1] or 0), tonumber(v[2] or LEAN_MAX), tonumber(v[3] or 0)}
