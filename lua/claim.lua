-- claim.lua: claims up to N ready jobs in order (priority, then FIFO),
-- first promoting due scheduled jobs and recovering expired leases.
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 owner string, 3 expiry ms (> 0), 4 count (1..1000),
--        5 '1' when the claimer holds no job now (may take a suspect).
-- Effects per claimed job: SET NS:<id>.owned owner PX expiry, SET
--        NS:<id>.last_modified = datetime(TIME), fencing token + 1, lease
--        index. Index entries whose listing is gone (consumed by taskflow)
--        are dropped; jobs claimed by taskflow are parked in the lease index.
-- Suspects (jobs that were in a worker that died holding several) are
--        handed out alone, to an idle claimer, as the only job of the claim;
--        other claimers skip them and they keep their place.
-- Returns: {'ok', unindexed, n, id, posting, token, attempts, max, prio,
--        suspect (0/1), …}
--        where unindexed = 1 when the listings hold more jobs than the
--        index (posted by taskflow): the caller indexes them and claims again.

local who, expiry_ms, count = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local idle = ARGV[5] == '1'
local s, us, now_ms = now()
promote(now_ms)
recover(s, us, now_ms)

local out = {'ok', 0, 0}
local n = 0
local rounds = 0
local skipped = {}
local alone = false
while n < count and not alone and rounds < 8 do
  rounds = rounds + 1
  local popped = redis.call('ZPOPMIN', K_READY, count - n)
  if #popped == 0 then break end
  for i = 1, #popped, 2 do
    local id = popped[i]
    local posting = redis.call('HGET', K_LISTINGS, id)
    local suspect = posting and redis.call('HEXISTS', job_key(id), 'suspect') == 1
    if not posting then
      redis.call('DEL', job_key(id))
    elseif redis.call('EXISTS', owned_key(id)) == 1 then
      park_foreign(id, now_ms)
    elseif alone or (suspect and not (idle and n == 0)) then
      skipped[#skipped + 1] = popped[i + 1]
      skipped[#skipped + 1] = id
    else
      if suspect then
        redis.call('HDEL', job_key(id), 'suspect')
        alone = true
      end
      local token = take(id, who, expiry_ms, s, us, now_ms)
      local v = redis.call('HMGET', job_key(id), 'attempts', 'max', 'prio')
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
for i = 1, #skipped, 2 do redis.call('ZADD', K_READY, skipped[i], skipped[i + 1]) end
out[3] = n
local indexed = redis.call('ZCARD', K_READY) + redis.call('ZCARD', K_SCHEDULED)
  + redis.call('ZCARD', K_LEASES)
if redis.call('HLEN', K_LISTINGS) > indexed then out[2] = 1 end
return out
