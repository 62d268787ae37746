-- lib/stats.lua: today's queue statistics (wait and run times, counts).
-- include: keys, time

-- Days of statistics kept.
local STATS_TTL = 30 * 86400

-- qless's histogram buckets: seconds for the first minute, then minutes,
-- hours, and days (the last bucket, d7, holds a week and more). The
-- seconds' names are written out: 's' .. s formats a Lua number (about
-- 2,000 instructions), and most samples fall in the first seconds.
local SECONDS = {
  [0] = 's0', 's1', 's2', 's3', 's4', 's5', 's6', 's7', 's8', 's9',
  's10', 's11', 's12', 's13', 's14', 's15', 's16', 's17', 's18', 's19',
  's20', 's21', 's22', 's23', 's24', 's25', 's26', 's27', 's28', 's29',
  's30', 's31', 's32', 's33', 's34', 's35', 's36', 's37', 's38', 's39',
  's40', 's41', 's42', 's43', 's44', 's45', 's46', 's47', 's48', 's49',
  's50', 's51', 's52', 's53', 's54', 's55', 's56', 's57', 's58', 's59'
}
local function bucket(ms)
  local s = math.floor(ms / 1000)
  if s < 60 then return SECONDS[s] end
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

-- How `samples` (durations in ms, or nil) are written: 'sums' (the sums
-- and the histogram), 'zero' when they are all 0 ms, nil when there are
-- none.
local function way(samples)
  if not samples or #samples == 0 then return nil end
  for _, x in ipairs(samples) do
    if x ~= 0 then return 'sums' end
  end
  return 'zero'
end

-- Counts samples of `kind` that are all 0 ms (a job handed off by the call
-- that posted it waited 0 ms) in `<kind>.zero`: one HINCRBY instead of
-- reading and writing the sums. Readers fold them in as a group of that
-- many samples with mean 0 in bucket s0 (runtime/src/redis/stats.rs).
local function count_zeros(key, kind, n)
  if redis.call('HINCRBY', key, kind .. '.zero', int(n)) == n then redis.call('EXPIRE', key, STATS_TTL) end
end

-- Folds `samples` into a kind's count, mean and Welford's m2 (as stored,
-- or nil) and adds them to its histogram; returns the new count (as
-- text), mean and m2. One HINCRBY per run of samples in one bucket (the
-- samples of a call mostly share one), without a table.
local function fold(key, kind, samples, stored_count, stored_mean, stored_m2)
  local n, mean, m2 = tonumber(stored_count or 0), tonumber(stored_mean or 0), tonumber(stored_m2 or 0)
  local b, run = nil, 0
  for _, x in ipairs(samples) do
    n = n + 1
    local d = x - mean
    mean = mean + d / n
    m2 = m2 + d * (x - mean)
    local this = bucket(x)
    if this ~= b then
      if run > 0 then redis.call('HINCRBY', key, kind .. '.b.' .. b, int(run)) end
      b, run = this, 0
    end
    run = run + 1
  end
  redis.call('HINCRBY', key, kind .. '.b.' .. b, int(run))
  return int(n), mean, m2
end

-- Adds durations (ms) to today's statistics of run times (`runs`) and
-- wait times (`waits`; either may be nil or empty): count, mean and
-- Welford's m2 (variance = m2 / count), and histogram of each. The sums
-- of both kinds are read with one HMGET and written with one HSET.
local function add_stats(runs, waits, now_ms)
  local run_way, wait_way = way(runs), way(waits)
  if not run_way and not wait_way then return end
  local key = stats_key(now_ms)
  if run_way == 'zero' then count_zeros(key, 'run', #runs) end
  if wait_way == 'zero' then count_zeros(key, 'wait', #waits) end
  if run_way == 'sums' and wait_way == 'sums' then
    local v = redis.call('HMGET', key, 'run.count', 'run.mean', 'run.m2', 'wait.count', 'wait.mean', 'wait.m2')
    local rn, rmean, rm2 = fold(key, 'run', runs, v[1], v[2], v[3])
    local wn, wmean, wm2 = fold(key, 'wait', waits, v[4], v[5], v[6])
    redis.call('HSET', key, 'run.count', rn, 'run.mean', rmean, 'run.m2', rm2, 'wait.count', wn, 'wait.mean', wmean, 'wait.m2', wm2)
    -- The day's key gets its expiry with the first samples of a kind.
    if not v[1] or not v[4] then redis.call('EXPIRE', key, STATS_TTL) end
  elseif run_way == 'sums' or wait_way == 'sums' then
    local kind = run_way == 'sums' and 'run' or 'wait'
    local count, mean, m2 = kind .. '.count', kind .. '.mean', kind .. '.m2'
    local v = redis.call('HMGET', key, count, mean, m2)
    local n, new_mean, new_m2 = fold(key, kind, kind == 'run' and runs or waits, v[1], v[2], v[3])
    redis.call('HSET', key, count, n, mean, new_mean, m2, new_m2)
    if not v[1] then redis.call('EXPIRE', key, STATS_TTL) end
  end
  if run_way then count_minute('completed', #runs, now_ms) end
end

-- Counts one `failed` or `retried` in today's statistics.
local function count_stat(field, now_ms)
  local key = stats_key(now_ms)
  redis.call('HINCRBY', key, field, 1)
  redis.call('EXPIRE', key, STATS_TTL)
  if field == 'failed' then count_minute('failed', 1, now_ms) end
end
