-- prelude.lua: helpers shared by every jobworker script (sent in front of
-- each verb's file). Defines no keys of its own; see README.md for the key
-- layout and the meaning of ARGV[1] (the namespace prefix "NS:").

local K_LISTINGS, K_SEQUENCE, K_TRASH = KEYS[1], KEYS[2], KEYS[3]
local K_READY, K_SCHEDULED, K_LEASES = KEYS[4], KEYS[5], KEYS[6]
local K_COMPLETED, K_QUARANTINE, K_QREASON = KEYS[7], KEYS[8], KEYS[9]
local K_WAITING, K_QUEUE, K_TAGS, K_FAILED = KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local K_RECURRING, K_OUTBOX, K_TRACKED, K_TRASHED = KEYS[14], KEYS[15], KEYS[16], KEYS[17]
local NS, QUEUE, EVENTS = ARGV[1], ARGV[2], ARGV[3]

-- Lease-recovery batch and the re-check delay of claims held without an
-- expiry (taskflow's default): both bound every loop.
local RECOVER_BATCH = 100
local RECHECK_MS = 60000
local PRIO_LIMIT = 1048576
local SEQ_SPAN = 4294967296
-- Events kept in one job's history; days of statistics kept.
local HISTORY_LIMIT = 100
local STATS_TTL = 30 * 86400

local function owned_key(id) return NS .. id .. '.owned' end
local function modified_key(id) return NS .. id .. '.last_modified' end
local function job_key(id) return NS .. 'jw.job.' .. id end
local function history_key(id) return NS .. 'jw.history.' .. id end
local function deps_key(id) return NS .. 'jw.deps.' .. id end
local function dependents_key(id) return NS .. 'jw.dependents.' .. id end
local function tag_key(tag) return NS .. 'jw.tag.' .. tag end
local function failed_key(group) return NS .. 'jw.failed.' .. group end
local function stats_key(now_ms) return NS .. 'jw.stats.' .. math.floor(now_ms / 86400000) end
local function notify() redis.call('PUBLISH', NS .. 'jw.notify', 'ready') end

-- Server time: seconds, microseconds, milliseconds.
local function now()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s, us, s * 1000 + math.floor(us / 1000)
end

-- msgpack encoding of a non-negative integer in its smallest form, as
-- msgpack-python writes it.
local function mp_uint(n)
  local function bytes(v, count)
    local out = {}
    for i = count, 1, -1 do
      out[i] = string.char(v % 256)
      v = math.floor(v / 256)
    end
    return table.concat(out)
  end
  if n < 128 then return string.char(n)
  elseif n < 256 then return '\204' .. string.char(n)
  elseif n < 65536 then return '\205' .. bytes(n, 2)
  elseif n < 4294967296 then return '\206' .. bytes(n, 4)
  else return '\207' .. bytes(n, 8) end
end

-- oslo msgpackutils datetime (ext type 1, naive UTC) for a Unix time.
local function oslo_datetime(s, us)
  local days = math.floor(s / 86400)
  local secs = s - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local day = doy - math.floor((153 * mp + 2) / 5) + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400 + (month <= 2 and 1 or 0)
  local payload = '\135'
    .. '\163day' .. mp_uint(day)
    .. '\165month' .. mp_uint(month)
    .. '\164year' .. mp_uint(year)
    .. '\164hour' .. mp_uint(math.floor(secs / 3600))
    .. '\166minute' .. mp_uint(math.floor(secs % 3600 / 60))
    .. '\166second' .. mp_uint(secs % 60)
    .. '\171microsecond' .. mp_uint(us)
  return '\199' .. string.char(#payload) .. '\1' .. payload
end

-- Ready-index score: higher priority first, then FIFO by sequence.
local function ready_score(id)
  local v = redis.call('HMGET', job_key(id), 'prio', 'seq')
  return (PRIO_LIMIT - tonumber(v[1] or 0)) * SEQ_SPAN + tonumber(v[2] or 0)
end

-- Puts a job in the ready index; `since` (ms) starts its wait time.
local function make_ready(id, since)
  redis.call('ZADD', K_READY, ready_score(id), id)
  redis.call('HSET', job_key(id), 'ready_at', since)
  redis.call('HDEL', job_key(id), 'state')
end

-- Whether the queue tracks any job, read once per script (most track
-- none, and then no event needs a per-job lookup).
local any_tracked = nil

-- A JSON string (cjson only when something needs escaping: ids, queue
-- and worker names rarely do, and events are on every hot path).
local function json_str(s)
  if s:find('[%c"\\]') then return cjson.encode(s) end
  return '"' .. s .. '"'
end

-- An event as a JSON object: event, queue, job, at, then `fields`
-- (strings and integers).
local function event_json(id, now_ms, event, fields)
  local parts = {'{"event":"', event, '","queue":', json_str(QUEUE), ',"job":', json_str(id),
    ',"at":', string.format('%d', now_ms)}
  for k, v in pairs(fields or {}) do
    parts[#parts + 1] = ',"' .. k .. '":'
    parts[#parts + 1] = type(v) == 'number' and string.format('%d', v) or json_str(tostring(v))
  end
  parts[#parts + 1] = '}'
  return table.concat(parts)
end

-- Whether anyone listens to the event channels, read once per script:
-- publishing is a good part of a job's server time, so nobody listening
-- means no event is built or sent. (Pattern subscribers count as
-- listening; in Redis Cluster, subscribers must be on the queue's node.)
local listening = nil

-- Publishes an event (`msg`, or built from the rest when nil): on the log
-- channel, and on the event's own channel when the job is tracked.
local function publish(id, now_ms, event, fields, msg)
  if listening == nil then
    listening = redis.call('PUBSUB', 'NUMPAT') > 0 or redis.call('PUBSUB', 'NUMSUB', EVENTS .. ':log')[2] > 0
  end
  if any_tracked == nil then any_tracked = redis.call('ZCARD', K_TRACKED) > 0 end
  local tracked = any_tracked and redis.call('ZSCORE', K_TRACKED, id)
  if not listening and not tracked then return end
  msg = msg or event_json(id, now_ms, event, fields)
  if listening then redis.call('PUBLISH', EVENTS .. ':log', msg) end
  if tracked then redis.call('PUBLISH', EVENTS .. ':ev:' .. event, msg) end
end

-- Publishes an event and appends it to the job's history list.
--
-- The list holds only what the job hash cannot tell: posted (`posted`,
-- `name`), the latest claim (`token`, `claimed_at`, `claimed_by`) and
-- consumed (`finished`) are rebuilt from the hash when read, so a job that
-- simply runs once writes no list at all. The latest claim is copied into
-- the list (`logged` = its token) before any later event, so that the
-- list keeps every claim in order.
local function record(id, now_ms, event, fields)
  local h = history_key(id)
  local v = redis.call('HMGET', job_key(id), 'token', 'logged', 'claimed_at', 'claimed_by')
  if v[1] and v[1] ~= '0' and v[1] ~= v[2] and v[3] then
    local claim = event_json(id, tonumber(v[3]), 'claimed', {worker = v[4] or '', token = tonumber(v[1])})
    redis.call('RPUSH', h, claim)
    redis.call('HSET', job_key(id), 'logged', v[1])
  end
  local msg = event_json(id, now_ms, event, fields)
  publish(id, now_ms, event, fields, msg)
  if redis.call('RPUSH', h, msg) > HISTORY_LIMIT then redis.call('LTRIM', h, -HISTORY_LIMIT, -1) end
end

-- qless's histogram buckets: seconds for the first minute, then minutes,
-- hours, and days (the last bucket, d7, holds a week and more).
local function bucket(ms)
  local s = math.floor(ms / 1000)
  if s < 60 then return 's' .. s end
  if s < 3600 then return 'm' .. math.floor(s / 60) end
  if s < 86400 then return 'h' .. math.floor(s / 3600) end
  return 'd' .. math.min(math.floor(s / 86400), 7)
end

-- Adds durations (ms) to today's `kind` ('wait' or 'run') statistics:
-- count, mean and Welford's m2 (variance = m2 / count), and histogram.
local function add_stats(kind, samples, now_ms)
  if #samples == 0 then return end
  local key = stats_key(now_ms)
  local v = redis.call('HMGET', key, kind .. '.count', kind .. '.mean', kind .. '.m2')
  local n, mean, m2 = tonumber(v[1] or 0), tonumber(v[2] or 0), tonumber(v[3] or 0)
  local buckets = {}
  for _, x in ipairs(samples) do
    n = n + 1
    local d = x - mean
    mean = mean + d / n
    m2 = m2 + d * (x - mean)
    local b = bucket(x)
    buckets[b] = (buckets[b] or 0) + 1
  end
  for b, count in pairs(buckets) do redis.call('HINCRBY', key, kind .. '.b.' .. b, count) end
  redis.call('HSET', key, kind .. '.count', n, kind .. '.mean', mean, kind .. '.m2', m2)
  redis.call('EXPIRE', key, STATS_TTL)
end

-- Counts one `failed` or `retried` in today's statistics.
local function count_stat(field, now_ms)
  local key = stats_key(now_ms)
  redis.call('HINCRBY', key, field, 1)
  redis.call('EXPIRE', key, STATS_TTL)
end

-- Tags of a job (its hash keeps them as a JSON array).
local function tags_of(id)
  local t = redis.call('HGET', job_key(id), 'tags')
  if not t or t == '[]' then return {} end
  return cjson.decode(t)
end

-- Deletes everything jobworker keeps about a finished job.
local function forget_job(id)
  for _, tag in ipairs(tags_of(id)) do
    redis.call('ZREM', tag_key(tag), id)
    if tonumber(redis.call('ZINCRBY', K_TAGS, -1, tag)) <= 0 then redis.call('ZREM', K_TAGS, tag) end
  end
  redis.call('ZREM', K_TRACKED, id)
  redis.call('DEL', job_key(id), history_key(id), deps_key(id), dependents_key(id))
end

-- Takes a job out of its failure group and the trash's retention index
-- (retry and purge).
local function unfail(id)
  local group = redis.call('HGET', job_key(id), 'group')
  if group then
    redis.call('ZREM', failed_key(group), id)
    if tonumber(redis.call('ZINCRBY', K_FAILED, -1, group)) <= 0 then redis.call('ZREM', K_FAILED, group) end
  end
  redis.call('ZREM', K_TRASHED, id)
end

-- Deletes a trashed job for good: taskflow's trash entry and every piece
-- of jobworker state. False when it is not in the trash.
local function purge_trashed(id)
  if redis.call('HDEL', K_TRASH, id) == 0 then
    redis.call('ZREM', K_TRASHED, id)
    return false
  end
  unfail(id)
  redis.call('DEL', modified_key(id))
  forget_job(id)
  return true
end

-- The oldest members of a retention index (zset member → time) beyond
-- `keep` of them or older than `max_age`: at most `budget` of each.
local function beyond(index, keep, max_age, now_ms, budget)
  local old = redis.call('ZRANGEBYSCORE', index, '-inf', now_ms - max_age, 'LIMIT', 0, budget)
  local excess = redis.call('ZCARD', index) - keep - #old
  if excess > 0 then
    for _, id in ipairs(redis.call('ZRANGE', index, #old, #old + math.min(excess, budget) - 1)) do
      old[#old + 1] = id
    end
  end
  return old
end

-- Drops trashed jobs beyond the trash's count or age (at most `budget` per
-- call, oldest first, so the cost stays bounded). Only jobs that are still
-- trashed go; an index entry of a job that lives again is dropped alone.
local function prune_trash(keep, max_age, now_ms, budget)
  for _, id in ipairs(beyond(K_TRASHED, keep, max_age, now_ms, budget)) do
    if redis.call('HGET', job_key(id), 'state') == 'trashed' then
      purge_trashed(id)
    else
      redis.call('ZREM', K_TRASHED, id)
    end
  end
end

-- The failure group of a reason: its leading "kind:" word(s), e.g.
-- "stalled", "fatal", "poison-pill"; "error" when there is none.
local function group_of(reason)
  local kind = reason:match('^([%w _%-]+):')
  if not kind then return 'error' end
  return (kind:lower():gsub('[ _]', '-'))
end

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

-- A job whose listing vanished behind jobworker's back: taskflow trashed
-- it (it is in the trash) or consumed it (then it is completed, in the
-- history, and its dependents are released).
local function listing_vanished(id, now_ms)
  if redis.call('EXISTS', job_key(id)) == 0 then return end
  if redis.call('HEXISTS', K_TRASH, id) == 1 then
    redis.call('HSET', job_key(id), 'state', 'trashed')
    return
  end
  local released = release_dependents(id, now_ms)
  redis.call('HSET', job_key(id), 'state', 'completed', 'finished', now_ms)
  redis.call('HDEL', job_key(id), 'owner')
  redis.call('ZADD', K_COMPLETED, now_ms, id)
  publish(id, now_ms, 'consumed', {worker = 'outside jobworker'})
  if released > 0 then notify() end
end

-- A lease was given up: workers waiting at the queue's concurrency limit
-- may go on.
local function lease_freed()
  if redis.call('HEXISTS', K_QUEUE, 'limit') == 1 then notify() end
end

-- Drops completed jobs beyond the history's count or age (at most
-- `budget` of each per call, so the cost stays bounded).
local function prune_history(keep, max_age, now_ms, budget)
  for _, id in ipairs(beyond(K_COMPLETED, keep, max_age, now_ms, budget)) do
    redis.call('ZREM', K_COMPLETED, id)
    forget_job(id)
  end
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

-- Moves a listed job to taskflow's trash with a reason (taskflow's key
-- effects: trash copy, last_modified set, owner and listing deleted), in
-- the failure group of the reason.
local function trash_job(id, reason, s, us, now_ms)
  local posting = redis.call('HGET', K_LISTINGS, id)
  if posting then redis.call('HSET', K_TRASH, id, posting) end
  redis.call('SET', modified_key(id), oslo_datetime(s, us))
  redis.call('DEL', owned_key(id))
  redis.call('HDEL', K_LISTINGS, id)
  redis.call('ZREM', K_LEASES, id)
  redis.call('ZREM', K_READY, id)
  redis.call('ZREM', K_SCHEDULED, id)
  local group = group_of(reason)
  redis.call('HSET', job_key(id), 'state', 'trashed', 'reason', reason, 'group', group, 'finished', now_ms)
  redis.call('HDEL', job_key(id), 'owner')
  redis.call('ZADD', failed_key(group), now_ms, id)
  redis.call('ZINCRBY', K_FAILED, 1, group)
  redis.call('ZADD', K_TRASHED, now_ms, id)
  count_stat('failed', now_ms)
  record(id, now_ms, 'trashed', {group = group, reason = reason})
end

-- Counts a failed try; trashes the job once its attempts are used up.
-- Returns true when the job was trashed.
local function count_attempt(id, reason, s, us, now_ms)
  local job = job_key(id)
  local attempts = redis.call('HINCRBY', job, 'attempts', 1)
  local max = tonumber(redis.call('HGET', job, 'max') or 1)
  redis.call('HSET', job, 'reason', reason)
  record(id, now_ms, 'failed', {attempt = attempts, reason = reason})
  if attempts >= max then
    trash_job(id, reason .. ' (attempts exhausted: ' .. attempts .. ' of ' .. max .. ')', s, us, now_ms)
    return true
  end
  count_stat('retried', now_ms)
  record(id, now_ms, 'retried', {attempt = attempts})
  return false
end

-- Moves due scheduled jobs to ready (bounded batch); their wait starts at
-- their run-at time.
local function promote(now_ms)
  local due = redis.call('ZRANGEBYSCORE', K_SCHEDULED, '-inf', now_ms, 'WITHSCORES', 'LIMIT', 0, RECOVER_BATCH)
  for i = 1, #due, 2 do
    redis.call('ZREM', K_SCHEDULED, due[i])
    make_ready(due[i], due[i + 1])
  end
  return #due / 2
end

-- Re-checks leases past their deadline (bounded batch): a lease still
-- held (extended outside jobworker, or a taskflow claim) gets a new
-- deadline; a lease that is gone counts an attempt and the job goes back
-- to ready, or to the trash when its attempts are used up.
local function recover(s, us, now_ms)
  local expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', now_ms, 'LIMIT', 0, RECOVER_BATCH)
  local stalled = 0
  for _, id in ipairs(expired) do
    if redis.call('HEXISTS', K_LISTINGS, id) == 0 then
      redis.call('ZREM', K_LEASES, id)
      listing_vanished(id, now_ms)
    else
      local ttl = redis.call('PTTL', owned_key(id))
      if ttl > 0 then
        redis.call('ZADD', K_LEASES, now_ms + ttl, id)
      elseif ttl == -1 then
        redis.call('ZADD', K_LEASES, now_ms + RECHECK_MS, id)
      else
        stalled = stalled + 1
        redis.call('ZREM', K_LEASES, id)
        local job = job_key(id)
        local who = redis.call('HGET', job, 'owner') or 'unknown owner'
        redis.call('HDEL', job, 'owner')
        record(id, now_ms, 'stalled', {worker = who})
        if not count_attempt(id, 'stalled: lease of ' .. who .. ' expired', s, us, now_ms) then
          make_ready(id, now_ms)
        end
      end
    end
  end
  return stalled
end

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

-- Parks a job claimed outside jobworker (taskflow) in the lease index
-- until its claim goes away.
local function park_foreign(id, now_ms)
  local ttl = redis.call('PTTL', owned_key(id))
  local deadline = now_ms + (ttl > 0 and ttl or RECHECK_MS)
  redis.call('ZADD', K_LEASES, deadline, id)
end

-- The state of a job of this queue, from its index entries.
local function state_of(id)
  if redis.call('ZSCORE', K_READY, id) then return 'ready' end
  if redis.call('ZSCORE', K_LEASES, id) then return 'claimed' end
  if redis.call('ZSCORE', K_SCHEDULED, id) then return 'scheduled' end
  if redis.call('ZSCORE', K_WAITING, id) then return 'waiting' end
  local state = redis.call('HGET', job_key(id), 'state')
  if state then return state end
  if redis.call('HEXISTS', K_LISTINGS, id) == 1 then return 'ready' end
  return nil
end

-- Whether the queue has waiting jobs, read once per script.
local any_waiting = nil

-- Posts one job. `extra` (decoded JSON or nil) may carry tags, track,
-- unique = {key, ttl}, and deps = {"queue\nid", …}. Returns the status
-- ('ready' | 'scheduled' | 'waiting' | 'exists' | 'duplicate' |
-- 'bad_dependency') and a value (sequence, existing id or the bad
-- dependency). A job without dependencies costs taskflow's INCR and
-- HSETNX (which is also the existence check) plus the index and history.
local function post_job(id, head, tail, prio, max, delay, name, extra, created, now_ms)
  if any_waiting == nil then any_waiting = redis.call('ZCARD', K_WAITING) > 0 end
  if any_waiting and redis.call('ZSCORE', K_WAITING, id) then return 'exists', 0 end
  extra = extra or {}
  local unique = extra.unique
  if unique then
    local holder = redis.call('GET', NS .. 'jw.unique.' .. unique.key)
    if holder and holder ~= id and state_of(holder) then return 'duplicate', holder end
  end
  local pending = {}
  for _, ref in ipairs(extra.deps or {}) do
    local q, dep = ref:match('^(.-)\n(.*)$')
    if q == QUEUE then
      local state = state_of(dep)
      if not state or state == 'cancelled' then return 'bad_dependency', dep end
      if state ~= 'completed' then pending[#pending + 1] = ref end
    else
      pending[#pending + 1] = ref
    end
  end
  local waits = #pending > 0
  if waits and redis.call('HEXISTS', K_LISTINGS, id) == 1 then return 'exists', 0 end
  local seq = redis.call('INCR', K_SEQUENCE)
  local posting = head .. created .. tail .. mp_uint(seq)
  if not waits and redis.call('HSETNX', K_LISTINGS, id, posting) == 0 then return 'exists', 0 end
  if unique then redis.call('SET', NS .. 'jw.unique.' .. unique.key, id, 'PX', unique.ttl) end
  local job = job_key(id)
  if redis.call('EXISTS', job) == 1 then
    -- The id of a finished job, posted again: a new life (out of the
    -- history, or out of the trash and its failure group).
    if redis.call('HGET', job, 'state') == 'trashed' then
      unfail(id)
      redis.call('HDEL', K_TRASH, id)
    end
    forget_job(id)
    redis.call('ZREM', K_COMPLETED, id)
  end
  local run_at = now_ms + tonumber(delay)
  local fields = {'name', name, 'prio', prio, 'seq', seq, 'max', max, 'attempts', 0, 'token', 0, 'posted', now_ms}
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
    fields[#fields + 1] = now_ms
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
  publish(id, now_ms, 'posted', {name = name})
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
    redis.call('ZADD', K_READY, (PRIO_LIMIT - tonumber(prio)) * SEQ_SPAN + seq, id)
  end
  return status, seq
end
