-- lib/consume_jobs.lua: the consume of consume.lua (effects and statuses:
-- its header), also run by consume_then_claim.lua before its claim.
-- include: time, lease, events, deps, retention, lean

-- Whether job `id`, no longer held by `who` with `token`, was consumed
-- by it: completed, and its hash (which a consume leaves as it is) names
-- that owner and token (`held`: its token field).
local function consumed_by(id, who, token, held)
  return (token == '0' or held == token) and redis.call('HGET', job_key(id), 'owner') == who
    and redis.call('ZSCORE', K_COMPLETED, id) ~= false
end

-- Consumes the jobs of `args` (triples job id, owner string, fencing
-- token from index `first` to the end) at the server time `now_ms`,
-- keeping `keep` jobs of history (0: none); appends a status and an
-- owner per job to `out`. Returns the run times (ms) of the jobs
-- consumed, for the caller's `add_stats`. `again`: the call is sent again
-- after its reply was lost, and a job its first sending consumed is 'ok'.
local function consume_jobs(out, args, first, keep, now_ms, again)
  local runs = {}
  local released = 0
  -- One call per batch for what its jobs share: the owner keys read; the
  -- owner and last_modified keys deleted, the lease index and the history
  -- written.
  local owned = {}
  for i = first, #args - 2, 3 do owned[#owned + 1] = owned_key(args[i]) end
  local owners = #owned > 0 and redis.call('MGET', unpack(owned)) or {}
  -- `unready`: jobs consumed under a claim made outside jobworker (token
  -- '0'), still in the ready index.
  local gone, done, unready = {}, {}, {}
  for i = first, #args - 2, 3 do
    local id, who, token = args[i], args[i + 1], args[i + 2]
    local owned_id = owned[(i - first) / 3 + 1]
    local job = job_key(id)
    local v = redis.call('HMGET', job, 'token', 'claimed_at', 'dependents')
    local refused = nil
    local owner = owners[(i - first) / 3 + 1]
    if owner ~= who or (token ~= '0' and v[1] ~= token) then
      refused = {'not_owner', owner or ''}
      if redis.call('HEXISTS', K_LISTINGS, id) == 0 then refused = unlisted(id) end
    else
      -- A lean job claimed outside jobworker gets its post's fields from
      -- its listing (read before the delete: a first write that frees
      -- passes past maxmemory).
      local posting = token == '0' and redis.call('HGET', K_LISTINGS, id)
      if redis.call('HDEL', K_LISTINGS, id) == 0 then
        refused = unlisted(id)
      elseif posting then
        adopt(id, posting)
      end
    end
    if refused and again and consumed_by(id, who, token, v[1]) then
      out[#out + 1] = 'ok'
      out[#out + 1] = ''
    elseif refused then
      out[#out + 1] = refused[1]
      out[#out + 1] = refused[2] or ''
    else
      gone[#gone + 1] = owned_id
      gone[#gone + 1] = modified_key(id)
      done[#done + 1] = id
      if token == '0' then
        unready[#unready + 1] = id
        -- A claim made outside jobworker wrote no owner into the hash:
        -- recorded for a sending again (consumed_by).
        if keep > 0 then redis.call('HSET', job, 'owner', who) end
      end
      if v[2] then runs[#runs + 1] = math.max(0, now_ms - tonumber(v[2])) end
      if heard(id) then publish(id, now_ms, 'consumed', {worker = who}) end
      if v[3] then released = released + release_dependents(id, now_ms) end
      -- Kept in the history, the job is known as completed by its entry
      -- in the history index, whose score is its finish time (lib/state.lua,
      -- and the readers in runtime/src/redis): its hash is not written.
      if keep == 0 then forget_job(id) end
      out[#out + 1] = 'ok'
      out[#out + 1] = ''
    end
  end
  if #done > 0 then
    redis.call('DEL', unpack(gone))
    redis.call('ZREM', K_LEASES, unpack(done))
    if #unready > 0 then redis.call('ZREM', K_READY, unpack(unready)) end
    if keep > 0 then
      local history, at = {}, ms_text(now_ms)
      for _, id in ipairs(done) do
        history[#history + 1] = at
        history[#history + 1] = id
      end
      redis.call('ZADD', K_COMPLETED, unpack(history))
    end
  end
  if released > 0 then notify() else lease_freed() end
  return runs
end
