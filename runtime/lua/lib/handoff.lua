-- lib/handoff.lua: handing just-posted jobs straight to idle workers, so
-- that an idle worker's pickup costs no claim round trip.
-- include: keys, time, msgpack, events, stats, lean
--
-- A worker whose claim came up empty is registered in K_IDLE (claim.lua:
-- who → '<until ms> <lease ms> <tag>', the tag being the worker's own
-- clock when it sent that claim). post.lua then takes the lease a claim
-- would take, on the best ready job, and sends it on the worker's own
-- channel (NS:jw.handoff.<who>). One hand-off per registration: the entry
-- goes with it. Entries past their time, or whose worker no longer
-- listens (it died: its connection closed), are dropped and skipped when
-- a post meets them on its way.
-- A hand-off the worker never reads is a lease like any other: it expires
-- and the job is recovered. The message echoes the tag: the lease began
-- after the worker sent its claim, so the worker knows, by its own clock,
-- a lower bound of the lease's time left, and gives back a hand-off it
-- reads too late.

local function handoff_channel(who) return NS .. 'jw.handoff.' .. who end

-- The message: '<token> <attempts> <max> <prio> <lease ms> <tag> <id
-- length>\n' .. id .. posting (runtime/src/redis/handoff.rs reads it).
local function handoff_message(id, posting, token, v, lease_txt, tag)
  return string.format('%d %d %d %d %s %s %d\n', token, tonumber(v[1] or 0), tonumber(v[2] or LEAN_MAX),
    tonumber(v[3] or 0), lease_txt, tag, #id) .. id .. posting
end

-- Takes the lease on the best ready job for `who` and sends it; false
-- (nothing taken, the job kept its place) when there is no ready job or
-- the best one is not a plain one (a suspect, gone from the listings,
-- held outside jobworker): claims deal with those.
local function hand_one(who, lease_txt, tag, s, us, now_ms, known)
  local id, score, posting, v, facts
  local new = false
  if known and not known.used then
    -- The job this post call just wrote, not indexed yet: what a pop and
    -- two reads would give is known already (and, for a lean job, what
    -- its posting tells).
    known.used = true
    id, score, posting, v, new, facts = known.id, known.score, known.posting, known.fields, known.fresh, known.facts
  else
    local popped = redis.call('ZPOPMIN', K_READY)
    if #popped == 0 then return false end
    id, score = popped[1], popped[2]
    posting = redis.call('HGET', K_LISTINGS, id)
    v = redis.call('HMGET', job_key(id), 'attempts', 'max', 'prio', 'suspect', 'token', 'ready_at')
    facts = posting and lean_view(v, posting)
  end
  local job = job_key(id)
  if not posting or v[4] or not redis.call('SET', owned_key(id), who, 'PX', lease_txt, 'NX') then
    redis.call('ZADD', K_READY, score, id)
    return false
  end
  redis.call('SET', modified_key(id), oslo_datetime(s, us))
  local token = tonumber(v[5] or 0) + 1
  write_claim(job, int(token), who, ms_text(now_ms), who, facts)
  redis.call('ZADD', K_LEASES, int(now_ms + tonumber(lease_txt)), id)
  if v[6] then add_stats(nil, {math.max(0, now_ms - tonumber(v[6]))}, now_ms) end
  if heard(id, new) then publish(id, now_ms, 'claimed', {worker = who, token = token}) end
  redis.call(PUBLISH, handoff_channel(who), handoff_message(id, posting, token, v, lease_txt, tag))
  return true
end

-- Hands ready jobs to the queue's idle workers, one each, while the queue
-- hands out work (not paused, under its limit); true when it handed one.
-- `known` (or nil): the one job a post call just wrote to an empty queue,
-- not yet in the ready index, as {id, score, posting, fields (as claim's
-- HMGET reads them), facts (a lean job's, as lib/lean.lua's
-- posting_facts gives them, or nil)}; the first hand-off takes it, and marks it `used`
-- once it is handed or put in the index (when it could not be handed).
local function hand_off(s, us, now_ms, known)
  local idle = redis.call('HGETALL', K_IDLE)
  if #idle == 0 then return false end
  local settings = redis.call('HMGET', K_QUEUE, 'paused', 'limit')
  if settings[1] == '1' then return false end
  local handed = false
  local room = #idle / 2
  local limit = tonumber(settings[2] or 0)
  if limit > 0 then room = math.min(room, limit - redis.call('ZCARD', K_LEASES)) end
  for i = 1, #idle, 2 do
    if room <= 0 then break end
    local who = idle[i]
    local until_ms, lease_txt, tag = idle[i + 1]:match('^(%d+) (%d+) (%d+)$')
    if tonumber(until_ms or 0) <= now_ms or subscribers(handoff_channel(who)) == 0 then
      redis.call('HDEL', K_IDLE, who)
    elseif hand_one(who, lease_txt, tag, s, us, now_ms, known) then
      redis.call('HDEL', K_IDLE, who)
      room = room - 1
      handed = true
      -- The known job went to an empty queue: the ready index is empty, so
      -- the next idle worker has nothing to get.
      if known then break end
    else
      break
    end
  end
  return handed
end
