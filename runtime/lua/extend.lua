-- extend.lua: extends a held lease (the heartbeat; taskflow's extend_expiry
-- plus an owner and fencing-token check).
--
-- include: time, lease, history, lean
-- KEYS:  listings ready leases queue tracked.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 job id, 5 owner string, 6 fencing token ('0' = no
--        token check, for claims made by taskflow), 7 expiry ms (> 0).
-- Effects: PEXPIRE NS:<id>.owned; new lease deadline. Under a claim made
--        outside jobworker (token '0'), the job leaves the ready index
--        (it is claimed), a lean one with its hash written first
--        (lean.lua's adopt).
-- Returns: {'ok'} | {'not_found'} | {'cancelled'} | {'not_owner', current
--        owner or ''}

local id, who, token, expiry_ms = ARGV[4], ARGV[5], ARGV[6], tonumber(ARGV[7])
local refused = check_listed_lease(id, who, token)
local _, _, now_ms = now()
if refused then
  -- A cancel is in the history already; any other refusal is a lost lease.
  if refused[1] ~= 'cancelled' and redis.call('EXISTS', job_key(id)) == 1 then
    record(id, now_ms, 'lease_lost', {worker = who})
  end
  return refused
end
redis.call('PEXPIRE', owned_key(id), expiry_ms)
redis.call('ZADD', K_LEASES, now_ms + expiry_ms, id)
if token == '0' then
  adopt(id)
  redis.call('ZREM', K_READY, id)
end
return {'ok'}
