-- lib/claim_jobs.lua: the claim of claim.lua (ARGV, effects and reply:
-- its header), also run by consume_then_claim.lua after its consume.
-- include: time, msgpack, ready, maintenance, retention, foreign, events, stats, lean

-- Claims with the arguments `args` (a claim's ARGV: 4-15 as claim.lua's)
-- at the server time `s`, `us`, `now_ms`; returns claim.lua's reply.
-- `runs` (or nil): the run times (ms) of jobs consumed by the same call,
-- written to the statistics with the claim's wait times. `runs_written`
-- is set just before that write: a caller whose claim failed after it
-- does not write them again (not even when the write itself failed
-- partway: a time is rather lost than counted twice).
local runs_written = nil

-- The head of a claim reply: 'ok', unindexed (set by the caller), the
-- count (set by the caller), the outbox and the recurring slots due.
local function claim_head(now_ms)
  return {'ok', 0, 0, redis.call('SCARD', K_OUTBOX), redis.call('ZCOUNT', K_RECURRING, '-inf', ms_text(now_ms))}
end

-- A claim call's mark in `claimed_by` of the jobs it took: the claimer, a
-- newline and the call's number (1-499, on a cluster '<process>.<n>': a
-- claimer's calls in turn differ), and '!' for a suspect it took alone. Readers show what comes
-- before the newline. (Not in the lease deadline: a fraction there would
-- make every operation on a small, listpack-encoded lease index parse
-- scores as text, +11 % of the server's instructions in a bench.)
local function claimer_of(who, call, alone) return who .. '\n' .. call .. (alone and '!' or '') end

-- The reply the first sending of claim call `call` would have had, when
-- that reply was lost: the jobs it took (its mark) that `who` still
-- holds, found by the lease deadline of `who`'s last claim call that took
-- jobs (took_key()), in claim order and with their leases renewed for
-- `expiry_text` ms (the claimer counts them from now); nil when there are
-- none (that sending took none or never ran).
local function took_again(who, call, now_ms, expiry_text)
  local deadline = redis.call('ZSCORE', took_key(), who)
  if not deadline then return nil end
  local mark, mine = claimer_of(who, call), who .. '\n'
  local jobs = {}
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_LEASES, deadline, deadline)) do
    local job = job_key(id)
    local by = redis.call('HGET', job, 'claimed_by')
    local alone = by == mark .. '!'
    if by == mark or alone then
      local posting = redis.call('HGET', K_LISTINGS, id)
      if posting and redis.call('GET', owned_key(id)) == who then
        local v = redis.call('HMGET', job, 'attempts', 'max', 'prio', 'token', 'seq')
        jobs[#jobs + 1] = {id, posting, v[4], v[1] or '0', v[2] or LEAN_MAX, v[3] or '0', alone and 1 or 0,
          order = ready_order(v[3], v[5])}
      end
    elseif #jobs == 0 and by and by:sub(1, #mine) == mine then
      -- The claimer's last call that took jobs is another one (on a
      -- cluster every claim looks: this is the common case).
      return nil
    end
  end
  if #jobs == 0 then return nil end
  table.sort(jobs, function(a, b) return a.order < b.order end)
  local renewed = int(now_ms + tonumber(expiry_text))
  local out = claim_head(now_ms)
  out[3] = #jobs
  for _, job in ipairs(jobs) do
    redis.call('PEXPIRE', owned_key(job[1]), expiry_text)
    redis.call('ZADD', K_LEASES, renewed, job[1])
    for k = 1, 7 do out[#out + 1] = job[k] end
  end
  redis.call('ZADD', took_key(), renewed, who)
  return out
end

local function claim_jobs(args, s, us, now_ms, runs)
  local who, expiry_ms, count = args[4], tonumber(args[5]), tonumber(args[6])
  local expiry_text = args[5]
  local idle = args[7] == '1'
  if args[15] == '1' then
    -- (A settle-and-take call, on a cluster, whose first sending ran: its
    -- consumes were refused this time, so it has no run times to write.)
    local out = took_again(who, args[14], now_ms, expiry_text)
    if out then return out end
  end
  promote(now_ms)
  recover(s, us, now_ms)
  prune_index(K_COMPLETED, tonumber(args[8]), tonumber(args[9]), now_ms, count + 4)
  prune_trash(tonumber(args[10]), tonumber(args[11]), now_ms, 4)
  local settings = redis.call('HMGET', K_QUEUE, 'paused', 'limit')
  if settings[1] == '1' then count = 0 end
  local limit = tonumber(settings[2] or 0)
  if limit > 0 then count = math.max(0, math.min(count, limit - redis.call('ZCARD', K_LEASES))) end

  local out = claim_head(now_ms)
  local waits = {}
  local n = 0
  local rounds = 0
  local kept = {}
  local alone = false
  local modified = nil
  local deadline = int(now_ms + expiry_ms)
  local mark = claimer_of(who, args[14])
  while n < count and not alone and rounds < 8 do
    rounds = rounds + 1
    -- The next jobs in order, taken out of the index. (Not ZPOPMIN: it
    -- replies with each score, which the server formats as a double,
    -- 4,000 instructions a job. The removal comes before the SET NX
    -- below: a script sent with EVALSHA is refused past maxmemory when
    -- its first write adds data.)
    local ids = redis.call('ZRANGE', K_READY, '0', int(count - n - 1))
    if #ids == 0 then break end
    redis.call('ZREM', K_READY, unpack(ids))
    -- One call per round for what its jobs share: the postings read, the
    -- last_modified keys and the lease index written.
    local postings = redis.call('HMGET', K_LISTINGS, unpack(ids))
    local stamps, leases = {}, {}
    for i, id in ipairs(ids) do
      local job = job_key(id)
      local posting = postings[i]
      if not posting then
        listing_vanished(id, now_ms, true)
      else
        local v = redis.call('HMGET', job, 'attempts', 'max', 'prio', 'suspect', 'token', 'ready_at')
        local facts = lean_view(v, posting)
        local suspect = v[4] ~= false
        if alone or (suspect and not (idle and n == 0)) then
          -- (A lean job kept gets its hash: its place is read from it.)
          if facts then write_posted(id, facts) end
          kept[#kept + 1] = id
        elseif not redis.call('SET', owned_key(id), who, 'PX', expiry_text, 'NX') then
          if facts then write_posted(id, facts) end
          park_foreign(id, now_ms)
        else
          modified = modified or oslo_datetime(s, us)
          stamps[#stamps + 1] = modified_key(id)
          stamps[#stamps + 1] = modified
          local token = tonumber(v[5] or 0) + 1
          local token_text = int(token)
          write_claim(job, token_text, who, ms_text(now_ms), suspect and claimer_of(who, args[14], true) or mark,
            facts)
          if v[6] then waits[#waits + 1] = math.max(0, now_ms - tonumber(v[6])) end
          if heard(id) then publish(id, now_ms, 'claimed', {worker = who, token = token}) end
          if suspect then
            redis.call('HDEL', job, 'suspect')
            alone = true
          end
          leases[#leases + 1] = deadline
          leases[#leases + 1] = id
          n = n + 1
          out[#out + 1] = id
          out[#out + 1] = posting
          -- The counts go back as the stored text (the caller parses text
          -- and integers alike): no conversion per job.
          out[#out + 1] = token_text
          out[#out + 1] = v[1] or '0'
          out[#out + 1] = v[2]
          out[#out + 1] = v[3] or '0'
          out[#out + 1] = suspect and 1 or 0
        end
      end
    end
    if #stamps > 0 then
      redis.call('MSET', unpack(stamps))
      redis.call('ZADD', K_LEASES, unpack(leases))
    end
  end
  -- The skipped jobs go back to their place.
  for _, id in ipairs(kept) do redis.call('ZADD', K_READY, ready_score(id), id) end
  out[3] = n
  if n > 0 then
    -- For this call sent again when its reply is lost (took_again).
    redis.call('ZADD', took_key(), deadline, who)
  elseif count > 0 then
    -- An empty claim drops the records whose leases ran out.
    redis.call('ZREMRANGEBYSCORE', took_key(), '-inf', ms_text(now_ms))
  end
  runs_written = true
  add_stats(runs, waits, now_ms)
  local register_ms = tonumber(args[12])
  if register_ms > 0 then
    -- Dropped first also when registered again: an empty claim may have
    -- written nothing else, and its first write must not add data (see
    -- above), or an EVALSHA claim would be refused past maxmemory.
    redis.call('HDEL', K_IDLE, who)
    if n == 0 then
      redis.call('HSET', K_IDLE, who, int(now_ms + register_ms) .. ' ' .. int(expiry_ms) .. ' ' .. args[13])
    end
  end
  -- Only an empty claim looks for postings the index lacks (a short one
  -- comes back for more anyway, and the index service catches up).
  if n == 0 and count > 0 then
    local indexed = redis.call('ZCARD', K_READY) + redis.call('ZCARD', K_SCHEDULED)
      + redis.call('ZCARD', K_LEASES)
    if redis.call('HLEN', K_LISTINGS) > indexed then out[2] = 1 end
  end
  return out
end
