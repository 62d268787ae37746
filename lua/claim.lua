-- claim.lua: claims up to N ready jobs in order (priority, then FIFO),
-- first promoting due scheduled jobs and recovering expired leases.
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 owner string, 3 expiry ms (> 0), 4 count (1..1000).
-- Effects per claimed job: SET NS:<id>.owned owner PX expiry, SET
--        NS:<id>.last_modified = datetime(TIME), fencing token + 1, lease
--        index. Index entries whose listing is gone (consumed by taskflow)
--        are dropped; jobs claimed by taskflow are parked in the lease index.
-- Returns: {'ok', unindexed, n, id, posting, token, attempts, max, prio, …}
--        where unindexed = 1 when the listings hold more jobs than the
--        index (posted by taskflow): the caller indexes them and claims again.

local who, expiry_ms, count = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local s, us, now_ms = now()
promote(now_ms)
recover(s, us, now_ms)

local out = {'ok', 0, 0}
local n = 0
local rounds = 0
while n < count and rounds < 8 do
  rounds = rounds + 1
  local popped = redis.call('ZPOPMIN', K_READY, count - n)
  if #popped == 0 then break end
  for i = 1, #popped, 2 do
    local id = popped[i]
    local posting = redis.call('HGET', K_LISTINGS, id)
    if not posting then
      redis.call('DEL', job_key(id))
    elseif redis.call('EXISTS', owned_key(id)) == 1 then
      park_foreign(id, now_ms)
    else
      local token = take(id, who, expiry_ms, s, us, now_ms)
      local v = redis.call('HMGET', job_key(id), 'attempts', 'max', 'prio')
      n = n + 1
      out[#out + 1] = id
      out[#out + 1] = posting
      out[#out + 1] = token
      out[#out + 1] = tonumber(v[1] or 0)
      out[#out + 1] = tonumber(v[2] or 1)
      out[#out + 1] = tonumber(v[3] or 0)
    end
  end
end
out[3] = n
local indexed = redis.call('ZCARD', K_READY) + redis.call('ZCARD', K_SCHEDULED)
  + redis.call('ZCARD', K_LEASES)
if redis.call('HLEN', K_LISTINGS) > indexed then out[2] = 1 end
return out
