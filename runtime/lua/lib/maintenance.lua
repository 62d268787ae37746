-- lib/maintenance.lua: promoting due scheduled jobs and recovering expired leases
-- (bounded batches, run by claim and reap).
-- include: keys, time, ready, history, failure, foreign

-- Jobs promoted, and leases re-checked, per call at most (as text: a
-- Lua number passed to redis.call is formatted with '%.17g', on every
-- claim).
local RECOVER_BATCH = '100'

-- Moves due scheduled jobs to ready (bounded batch); their wait starts at
-- their run-at time.
local function promote(now_ms)
  local due = redis.call('ZRANGEBYSCORE', K_SCHEDULED, '-inf', ms_text(now_ms), 'WITHSCORES', 'LIMIT', '0', RECOVER_BATCH)
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
  local expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', ms_text(now_ms), 'LIMIT', '0', RECOVER_BATCH)
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
