-- leader.lua: takes, renews or gives up the leadership of one queue's
-- maintenance (see runtime/src/maintenance.rs). Unlike the verbs' scripts
-- it is sent without the prelude and takes its keys as KEYS.
--
-- KEYS:  1 NS:jw.leader, 2 NS:jw.took (inside the queue's hash tag:
--        cluster-safe).
-- ARGV:  1 who (the worker's owner string), 2 ttl ms; 0 = resign.
-- Effects: ttl > 0: the key is taken when free (SET NX PX ttl) or its
--        expiry is renewed when `who` holds it (PEXPIRE); someone else's
--        leadership is left alone. ttl = 0: the key is deleted only when
--        `who` holds it. The leader drops the claim records whose leases
--        ran out (lib/claim_jobs.lua; an empty claim does too, but a
--        queue that never runs dry has none).
-- Returns: {'ok', held} with held = 1 when `who` leads after the call
--        (for a resign: when it did lead and gave it up).

local key, who, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
local holder = redis.call('GET', key)
if ttl == 0 then
  if holder == who then
    redis.call('DEL', key)
    return {'ok', 1}
  end
  return {'ok', 0}
end
local function prune()
  local t = redis.call('TIME')
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', t[1] .. string.format('%03d', math.floor(t[2] / 1000)))
  return {'ok', 1}
end
if holder == who then
  redis.call('PEXPIRE', key, ttl)
  return prune()
end
if redis.call('SET', key, who, 'NX', 'PX', ttl) then
  return prune()
end
return {'ok', 0}
