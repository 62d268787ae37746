-- lib/posting.lua: posting one job (post and the recurring jobs' runs).
-- include: keys, time, msgpack, ready, events, tags, retention, deps, state, lean

-- Whether the queue has waiting jobs, read once per script.
local any_waiting = nil

-- The absent extras (one table per call, not one per job).
local NONE = {}

-- Puts a just-posted job in the ready index, or its score and id in
-- `ready_batch` for the caller's one ZADD of the batch.
local function index_ready(id, prio, seq, ready_batch)
  local score = int(ready_order(prio, seq))
  if ready_batch then
    ready_batch[#ready_batch + 1] = score
    ready_batch[#ready_batch + 1] = id
  else
    redis.call('ZADD', K_READY, score, id)
  end
end

-- Posts one job. `extra` (decoded JSON or nil) may carry tags, track,
-- unique = {key, ttl}, and deps = {"queue\nid", …}. Returns the status
-- ('ready' | 'scheduled' | 'waiting' | 'exists' | 'duplicate' |
-- 'bad_dependency' | 'again') and a value (sequence, existing id or the bad
-- dependency). A job without dependencies costs taskflow's HSETNX (which
-- is also the existence check) plus the index and history, and taskflow's
-- INCR of the sequence unless the caller took its `seq` with a batch's.
-- A `fresh` id (a uuid4 the client just generated) had no earlier life,
-- so its job hash is not looked for. With `ready_batch` (a table), a ready
-- job's score and id are appended to it for one ZADD of the whole batch
-- (the caller's); meanwhile `state_of` finds the job through its listing.
-- A plain ready job also returns its posting (the bytes listed) and
-- whether it is lean (no job hash: lib/lean.lua). `again`
-- (ms, or nil): the post is sent again after its reply was lost, the first
-- sending at most that long ago; a life of the id begun since is that
-- sending's ('again': not posted a second time, though it may have run
-- and finished meanwhile). A generated id had no other life. `again` 0
-- (a first sending on a cluster, whose client may send it again as it
-- is): only a generated id's job hash counts as that sending's.
local function post_job(id, head, tail, prio, max, delay, name, extra, created, now_ms, seq, fresh, ready_batch,
                        again)
  if again and (fresh or again > 0) then
    local v = redis.call('HMGET', job_key(id), 'posted', 'seq')
    -- (A generated id without `posted` that left any trace is a lean
    -- job, that sending's: listed, or taken by taskflow, which leaves it
    -- in the ready index until a claim meets it, then with a hash.)
    local lean = fresh and not v[1] and (redis.call('HEXISTS', K_LISTINGS, id) == 1
      or redis.call('ZSCORE', K_READY, id) or redis.call('EXISTS', job_key(id)) == 1)
    if lean or (v[1] and (fresh or tonumber(v[1]) >= now_ms - again)) then
      -- Still waiting: the caller links its dependencies in other queues
      -- (again: a set's additions) as after a first sending.
      if redis.call('ZSCORE', K_WAITING, id) then return 'waiting', tonumber(v[2]) or 0 end
      return 'again', 0
    end
  end
  extra = extra or NONE
  -- A job waiting for dependencies is not listed: the listing's HSETNX
  -- cannot find it. A fresh id without dependencies cannot be one.
  if not fresh or extra.deps then
    if any_waiting == nil then any_waiting = redis.call('ZCARD', K_WAITING) > 0 end
    if any_waiting and redis.call('ZSCORE', K_WAITING, id) then return 'exists', 0 end
  end
  local unique = extra.unique
  if unique then
    local holder = redis.call('GET', NS .. 'jw.unique.' .. unique.key)
    if holder and holder ~= id and state_of(holder) then return 'duplicate', holder end
  end
  local pending = nil
  for _, ref in ipairs(extra.deps or NONE) do
    local q, dep = ref:match('^(.-)\n(.*)$')
    if q == QUEUE then
      local state = state_of(dep)
      if not state or state == 'cancelled' then return 'bad_dependency', dep end
      if state ~= 'completed' then
        pending = pending or {}
        pending[#pending + 1] = ref
      end
    else
      pending = pending or {}
      pending[#pending + 1] = ref
    end
  end
  local waits = pending ~= nil
  if waits and redis.call('HEXISTS', K_LISTINGS, id) == 1 then return 'exists', 0 end
  seq = seq or redis.call('INCR', K_SEQUENCE)
  local posting = head .. created .. tail .. mp_uint(seq)
  if not waits and redis.call('HSETNX', K_LISTINGS, id, posting) == 0 then return 'exists', 0 end
  if unique then redis.call('SET', NS .. 'jw.unique.' .. unique.key, id, 'PX', unique.ttl) end
  local job = job_key(id)
  if not fresh and redis.call('EXISTS', job) == 1 then
    -- The id of a finished job, posted again: a new life (out of the
    -- history, or out of the trash and its failure group).
    if redis.call('HGET', job, 'state') == 'trashed' then
      unfail(id)
      redis.call('HDEL', K_TRASH, id)
    end
    forget_job(id)
    redis.call('ZREM', K_COMPLETED, id)
    redis.call('ZREM', K_CANCELLED, id)
  end
  -- (Each number read from text costs a strtod: a job posted now skips it.)
  local run_at = delay == '0' and now_ms or now_ms + tonumber(delay)
  if not waits and run_at <= now_ms and extra == NONE then
    -- The common case, a plain ready job: no table to build. Under a
    -- generated id with the default priority and attempts it is lean
    -- (lib/lean.lua): no job hash until its first claim. (No job hash has
    -- `attempts` or `token` before its first claim: absent reads as 0,
    -- and each field less is a listpack entry fewer to write and to scan
    -- past in every later HMGET.)
    local lean = fresh and prio == '0' and max == LEAN_MAX
    if not lean then
      local now_txt = ms_text(now_ms)
      redis.call('HSET', job, 'name', name, 'prio', prio, 'seq', int(seq), 'max', max, 'posted', now_txt,
        'ready_at', now_txt)
    end
    if heard(id, fresh) then publish(id, now_ms, 'posted', {name = name}) end
    index_ready(id, prio, seq, ready_batch)
    return 'ready', seq, posting, lean
  end
  local now_txt = ms_text(now_ms)
  local fields = {'name', name, 'prio', prio, 'seq', int(seq), 'max', max, 'posted', now_txt}
  local status
  if waits then
    status = 'waiting'
    fields[#fields + 1] = 'posting'
    fields[#fields + 1] = posting
  elseif run_at > now_ms then
    status = 'scheduled'
  else
    status = 'ready'
    fields[#fields + 1] = 'ready_at'
    fields[#fields + 1] = now_txt
  end
  if status ~= 'ready' then
    fields[#fields + 1] = 'state'
    fields[#fields + 1] = status
  end
  if run_at > now_ms then
    fields[#fields + 1] = 'run_at'
    fields[#fields + 1] = run_at
  end
  local tags = extra.tags or {}
  if #tags > 0 then
    fields[#fields + 1] = 'tags'
    fields[#fields + 1] = cjson.encode(tags)
    for _, tag in ipairs(tags) do
      redis.call('ZADD', tag_key(tag), now_ms, id)
      redis.call('ZINCRBY', K_TAGS, 1, tag)
    end
  end
  redis.call('HSET', job, unpack(fields))
  if extra.track then
    redis.call('ZADD', K_TRACKED, now_ms, id)
    any_tracked = true
  end
  if heard(id) then publish(id, now_ms, 'posted', {name = name}) end
  if status == 'waiting' then
    redis.call('ZADD', K_WAITING, now_ms, id)
    any_waiting = true
    for _, ref in ipairs(pending) do
      redis.call('SADD', deps_key(id), ref)
      local q, dep = ref:match('^(.-)\n(.*)$')
      if q == QUEUE then add_dependent(dep, QUEUE .. '\n' .. id) end
    end
  elseif status == 'scheduled' then
    redis.call('ZADD', K_SCHEDULED, run_at, id)
  else
    index_ready(id, prio, seq, ready_batch)
  end
  return status, seq
end
