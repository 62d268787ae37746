-- lib/lease.lua: checking a lease held by a worker, and freeing one.
-- include: keys

-- A lease was given up: workers waiting at the queue's concurrency limit
-- may go on.
local function lease_freed()
  if redis.call('HEXISTS', K_QUEUE, 'limit') == 1 then notify() end
end

-- The refusal for a lease on a job whose listing is gone: {'cancelled'}
-- when cancel took it (so its worker names the cancel, whichever path
-- tells it first), else {'not_found'}.
local function unlisted(id)
  if redis.call('HGET', job_key(id), 'state') == 'cancelled' then return {'cancelled'} end
  return {'not_found'}
end

-- Checks a lease (owner string + fencing token). Returns nil when held,
-- else the error reply. (A held lease on a job whose listing is gone is
-- caught by the caller's HDEL or HEXISTS.)
local function check_lease(id, who, token)
  local owner = redis.call('GET', owned_key(id))
  if owner == who and (token == '0' or redis.call('HGET', job_key(id), 'token') == token) then
    return nil
  end
  if redis.call('HEXISTS', K_LISTINGS, id) == 0 then return unlisted(id) end
  return {'not_owner', owner or ''}
end

-- check_lease, and the job must still be listed (extend, abandon and trash;
-- consume learns it from its HDEL instead).
local function check_listed_lease(id, who, token)
  local refused = check_lease(id, who, token)
  if not refused and redis.call('HEXISTS', K_LISTINGS, id) == 0 then return unlisted(id) end
  return refused
end
