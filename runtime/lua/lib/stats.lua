-- lib/stats.lua: today's queue statistics (wait and run times, counts).
-- include: keys, time

-- Days of statistics kept.
local STATS_TTL = 30 * 86400

-- qless's histogram buckets: seconds for the first minute, then minutes,
-- hours, and days (the last bucket, d7, holds a week and more).
local function bucket(ms)
  local s = math.floor(ms / 1000)
  if s < 60 then return 's' .. s end
  if s < 3600 then return 'm' .. math.floor(s / 60) end
  if s < 86400 then return 'h' .. math.floor(s / 3600) end
  return 'd' .. math.min(math.floor(s / 86400), 7)
end

-- Minutes kept in the per-minute counts.
local MINUTES_TTL = 2 * 3600

-- Adds `n` to this minute's count of `kind` ('completed' or 'failed'), in
-- `NS:jw.minutes.<hour>` (field '<minute of the hour>.<kind>'; the key
-- expires after two hours): the web app's throughput chart.
local function count_minute(kind, n, now_ms)
  local minute = math.floor(now_ms / 60000)
  local key = NS .. 'jw.minutes.' .. math.floor(minute / 60)
  -- The key's expiry is set when this minute's field is new (once per
  -- minute and kind, not once per call).
  if redis.call('HINCRBY', key, (minute % 60) .. '.' .. kind, int(n)) == n then redis.call('EXPIRE', key, MINUTES_TTL) end
end

-- Adds durations (ms) to today's `kind` ('wait' or 'run') statistics:
-- count, mean and Welford's m2 (variance = m2 / count), and histogram.
-- Samples that are all 0 ms (a job handed off by the call that posted it
-- waited 0 ms) are only counted, in `<kind>.zero`: one HINCRBY instead
-- of reading and writing the sums. Readers fold them in as a group of
-- that many samples with mean 0 in bucket s0 (runtime/src/redis/stats.rs).
local function add_stats(kind, samples, now_ms)
  if #samples == 0 then return end
  local key = stats_key(now_ms)
  local zeros = 0
  for _, x in ipairs(samples) do
    if x ~= 0 then break end
    zeros = zeros + 1
  end
  if zeros == #samples then
    if redis.call('HINCRBY', key, kind .. '.zero', int(zeros)) == zeros then redis.call('EXPIRE', key, STATS_TTL) end
    if kind == 'run' then count_minute('completed', zeros, now_ms) end
    return
  end
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
  for b, count in pairs(buckets) do redis.call('HINCRBY', key, kind .. '.b.' .. b, int(count)) end
  redis.call('HSET', key, kind .. '.count', int(n), kind .. '.mean', mean, kind .. '.m2', m2)
  -- The day's key gets its expiry with the first samples of each kind.
  if not v[1] then redis.call('EXPIRE', key, STATS_TTL) end
  if kind == 'run' then count_minute('completed', #samples, now_ms) end
end

-- Counts one `failed` or `retried` in today's statistics.
local function count_stat(field, now_ms)
  local key = stats_key(now_ms)
  redis.call('HINCRBY', key, field, 1)
  redis.call('EXPIRE', key, STATS_TTL)
  if field == 'failed' then count_minute('failed', 1, now_ms) end
end
