-- claim.lua: claims up to N ready jobs in order (priority, then FIFO),
-- first promoting due scheduled jobs, recovering expired leases and
-- pruning the completed history.
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 owner string, 3 expiry ms (> 0), 4 count (1..1000),
--        5 '1' when the claimer holds no job now (may take a suspect),
--        6 history count limit, 7 history age limit ms.
-- Effects per claimed job: SET NS:<id>.owned owner PX expiry NX (the NX is
--        the check that nobody, e.g. taskflow, holds it), SET
--        NS:<id>.last_modified = datetime(TIME), fencing token + 1, lease
--        index. Index entries whose listing is gone (consumed by taskflow)
--        are dropped; jobs claimed by taskflow are parked in the lease index.
--        Suspects (jobs that were in a worker that died holding several) are
--        handed out alone, to an idle claimer, as the only job of the claim;
--        other claimers skip them and they keep their place.
-- Returns: {'ok', unindexed, n, id, posting, token, attempts, max, prio,
--        suspect (0/1), …} where unindexed = 1 when the claim came up short
--        and the listings hold more jobs than the index (posted by
--        taskflow): the caller indexes them and claims again.

local who, expiry_ms, count = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local idle = ARGV[5] == '1'
local s, us, now_ms = now()
promote(now_ms)
recover(s, us, now_ms)
prune_history(tonumber(ARGV[6]), tonumber(ARGV[7]), now_ms, count + 4)

local out = {'ok', 0, 0}
local n = 0
local rounds = 0
local skipped = {}
local alone = false
local modified = nil
while n < count and not alone and rounds < 8 do
  rounds = rounds + 1
  local popped = redis.call('ZPOPMIN', K_READY, count - n)
  if #popped == 0 then break end
  for i = 1, #popped, 2 do
    local id = popped[i]
    local job = job_key(id)
    local posting = redis.call('HGET', K_LISTINGS, id)
    if not posting then
      redis.call('DEL', job)
    else
      local v = redis.call('HMGET', job, 'attempts', 'max', 'prio', 'suspect', 'token')
      local suspect = v[4] ~= false
      if alone or (suspect and not (idle and n == 0)) then
        skipped[#skipped + 1] = popped[i + 1]
        skipped[#skipped + 1] = id
      elseif not redis.call('SET', owned_key(id), who, 'PX', expiry_ms, 'NX') then
        park_foreign(id, now_ms)
      else
        modified = modified or oslo_datetime(s, us)
        redis.call('SET', modified_key(id), modified)
        local token = tonumber(v[5] or 0) + 1
        redis.call('HSET', job, 'token', token, 'owner', who)
        if suspect then
          redis.call('HDEL', job, 'suspect')
          alone = true
        end
        redis.call('ZADD', K_LEASES, now_ms + expiry_ms, id)
        n = n + 1
        out[#out + 1] = id
        out[#out + 1] = posting
        out[#out + 1] = token
        out[#out + 1] = tonumber(v[1] or 0)
        out[#out + 1] = tonumber(v[2] or 1)
        out[#out + 1] = tonumber(v[3] or 0)
        out[#out + 1] = suspect and 1 or 0
      end
    end
  end
end
for i = 1, #skipped, 2 do redis.call('ZADD', K_READY, skipped[i], skipped[i + 1]) end
out[3] = n
if n < count then
  local indexed = redis.call('ZCARD', K_READY) + redis.call('ZCARD', K_SCHEDULED)
    + redis.call('ZCARD', K_LEASES)
  if redis.call('HLEN', K_LISTINGS) > indexed then out[2] = 1 end
end
return out
