-- lib/take.lua: taking a lease on one named job (claim_job; claim.lua
-- takes its batch inline, see its header).
-- include: keys, msgpack, events, foreign

-- Takes a lease on a listed, unowned job; an expiry of 0 holds it until
-- it is released (the lease index re-checks it every RECHECK_MS).
local function take(id, who, expiry_ms, s, us, now_ms)
  if expiry_ms > 0 then
    redis.call('SET', owned_key(id), who, 'PX', expiry_ms)
  else
    redis.call('SET', owned_key(id), who)
    expiry_ms = RECHECK_MS
  end
  redis.call('SET', modified_key(id), oslo_datetime(s, us))
  local job = job_key(id)
  local token = redis.call('HINCRBY', job, 'token', 1)
  redis.call('HSET', job, 'owner', who, 'claimed_at', now_ms, 'claimed_by', who)
  redis.call('ZADD', K_LEASES, now_ms + expiry_ms, id)
  publish(id, now_ms, 'claimed', {worker = who, token = token})
  return token
end
