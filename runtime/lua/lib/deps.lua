-- lib/deps.lua: dependencies between jobs: dependents, releases, the outbox.
-- include: keys, ready, events, history

-- Puts a job whose dependencies are all met on the board: its posting
-- goes into the listings, and the job is ready (or scheduled).
local function release(id, now_ms)
  local job = job_key(id)
  local v = redis.call('HMGET', job, 'posting', 'run_at')
  redis.call('HSETNX', K_LISTINGS, id, v[1])
  redis.call('HDEL', job, 'posting')
  redis.call('ZREM', K_WAITING, id)
  local run_at = tonumber(v[2] or 0)
  if run_at > now_ms then
    redis.call('ZADD', K_SCHEDULED, run_at, id)
    redis.call('HSET', job, 'state', 'scheduled')
  else
    make_ready(id, now_ms)
  end
  record(id, now_ms, 'released')
end

-- Marks dependency `dep_ref` ("queue\nid") of waiting job `id` as met;
-- releases the job when it was the last one. Idempotent. Returns true
-- when the job was released.
local function resolve_dep(id, dep_ref, now_ms)
  local deps = deps_key(id)
  if redis.call('SREM', deps, dep_ref) == 0 or redis.call('SCARD', deps) > 0 then return false end
  if redis.call('HGET', job_key(id), 'state') ~= 'waiting' then return false end
  release(id, now_ms)
  return true
end

-- Records that job `id` (of this queue) has a dependent `ref`
-- ("queue\nid"); the job hash's `dependents` flag spares consume a lookup
-- for the jobs that have none.
local function add_dependent(id, ref)
  redis.call('SADD', dependents_key(id), ref)
  redis.call('HSET', job_key(id), 'dependents', 1)
end

-- A consumed job's dependents: those in this queue are resolved at once,
-- those in other queues are put in the outbox (the client resolves them
-- there, then removes the entry). Returns how many jobs were released.
local function release_dependents(id, now_ms)
  local key = dependents_key(id)
  local me = QUEUE .. '\n' .. id
  local released = 0
  for _, ref in ipairs(redis.call('SMEMBERS', key)) do
    local q, dep = ref:match('^(.-)\n(.*)$')
    if q == QUEUE then
      if resolve_dep(dep, me, now_ms) then released = released + 1 end
    else
      redis.call('SADD', K_OUTBOX, ref .. '\n' .. me)
    end
  end
  redis.call('DEL', key)
  return released
end
