-- prelude.lua: helpers shared by every jobworker script (sent in front of
-- each verb's file). Defines no keys of its own; see README.md for the key
-- layout and the meaning of ARGV[1] (the namespace prefix "NS:").

local K_LISTINGS, K_SEQUENCE, K_TRASH = KEYS[1], KEYS[2], KEYS[3]
local K_READY, K_SCHEDULED, K_LEASES = KEYS[4], KEYS[5], KEYS[6]
local K_COMPLETED, K_QUARANTINE, K_QREASON = KEYS[7], KEYS[8], KEYS[9]
local NS = ARGV[1]

-- Lease-recovery batch and the re-check delay of claims held without an
-- expiry (taskflow's default): both bound every loop.
local RECOVER_BATCH = 100
local RECHECK_MS = 60000
local PRIO_LIMIT = 1048576
local SEQ_SPAN = 4294967296

local function owned_key(id) return NS .. id .. '.owned' end
local function modified_key(id) return NS .. id .. '.last_modified' end
local function job_key(id) return NS .. 'jw.job.' .. id end

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

local function make_ready(id)
  redis.call('ZADD', K_READY, ready_score(id), id)
  redis.call('HDEL', job_key(id), 'state')
end

-- Drops completed jobs beyond the history's count or age (at most
-- `budget` of each per call, so the cost stays bounded).
local function prune_history(keep, max_age, now_ms, budget)
  local old = redis.call('ZRANGEBYSCORE', K_COMPLETED, '-inf', now_ms - max_age, 'LIMIT', 0, budget)
  local excess = redis.call('ZCARD', K_COMPLETED) - keep - #old
  if excess > 0 then
    for _, id in ipairs(redis.call('ZRANGE', K_COMPLETED, #old, #old + math.min(excess, budget) - 1)) do
      old[#old + 1] = id
    end
  end
  for _, id in ipairs(old) do
    redis.call('ZREM', K_COMPLETED, id)
    redis.call('DEL', job_key(id))
  end
end

-- Checks a lease (owner string + fencing token). Returns nil when held,
-- else the error reply. (A held lease on a job whose listing is gone is
-- caught by the caller's HDEL or HEXISTS.)
local function check_lease(id, who, token)
  local owner = redis.call('GET', owned_key(id))
  if owner == who and (token == '0' or redis.call('HGET', job_key(id), 'token') == token) then
    return nil
  end
  if redis.call('HEXISTS', K_LISTINGS, id) == 0 then return {'not_found'} end
  return {'not_owner', owner or ''}
end

-- check_lease, and the job must still be listed (extend, abandon and trash;
-- consume learns it from its HDEL instead).
local function check_listed_lease(id, who, token)
  local refused = check_lease(id, who, token)
  if not refused and redis.call('HEXISTS', K_LISTINGS, id) == 0 then return {'not_found'} end
  return refused
end

-- Moves a listed job to taskflow's trash with a reason (taskflow's key
-- effects: trash copy, last_modified set, owner and listing deleted).
local function trash_job(id, reason, s, us)
  local posting = redis.call('HGET', K_LISTINGS, id)
  if posting then redis.call('HSET', K_TRASH, id, posting) end
  redis.call('SET', modified_key(id), oslo_datetime(s, us))
  redis.call('DEL', owned_key(id))
  redis.call('HDEL', K_LISTINGS, id)
  redis.call('ZREM', K_LEASES, id)
  redis.call('ZREM', K_READY, id)
  redis.call('ZREM', K_SCHEDULED, id)
  redis.call('HSET', job_key(id), 'state', 'trashed', 'reason', reason)
  redis.call('HDEL', job_key(id), 'owner')
end

-- Counts a failed try; trashes the job once its attempts are used up.
-- Returns true when the job was trashed.
local function count_attempt(id, reason, s, us)
  local job = job_key(id)
  local attempts = redis.call('HINCRBY', job, 'attempts', 1)
  local max = tonumber(redis.call('HGET', job, 'max') or 1)
  redis.call('HSET', job, 'reason', reason)
  if attempts >= max then
    trash_job(id, reason .. ' (attempts exhausted: ' .. attempts .. ' of ' .. max .. ')', s, us)
    return true
  end
  return false
end

-- Moves due scheduled jobs to ready (bounded batch).
local function promote(now_ms)
  local due = redis.call('ZRANGEBYSCORE', K_SCHEDULED, '-inf', now_ms, 'LIMIT', 0, RECOVER_BATCH)
  for _, id in ipairs(due) do
    redis.call('ZREM', K_SCHEDULED, id)
    make_ready(id)
  end
  return #due
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
      if redis.call('HEXISTS', K_TRASH, id) == 1 then
        redis.call('HSET', job_key(id), 'state', 'trashed')
      else
        redis.call('DEL', job_key(id))
      end
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
        if not count_attempt(id, 'stalled: lease of ' .. who .. ' expired', s, us) then
          make_ready(id)
        end
      end
    end
  end
  return stalled
end

-- Takes a lease on a listed, unowned job.
local function take(id, who, expiry_ms, s, us, now_ms)
  redis.call('SET', owned_key(id), who, 'PX', expiry_ms)
  redis.call('SET', modified_key(id), oslo_datetime(s, us))
  local job = job_key(id)
  local token = redis.call('HINCRBY', job, 'token', 1)
  redis.call('HSET', job, 'owner', who)
  redis.call('ZADD', K_LEASES, now_ms + expiry_ms, id)
  return token
end

-- Parks a job claimed outside jobworker (taskflow) in the lease index
-- until its claim goes away.
local function park_foreign(id, now_ms)
  local ttl = redis.call('PTTL', owned_key(id))
  local deadline = now_ms + (ttl > 0 and ttl or RECHECK_MS)
  redis.call('ZADD', K_LEASES, deadline, id)
end
