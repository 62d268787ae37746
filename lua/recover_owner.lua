-- recover_owner.lua: gives back at once every lease a dead worker held,
-- instead of waiting for them to expire (the supervisor's crash recovery).
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 owner string of the dead worker, 3 crash reason
--        (e.g. "worker w0 killed by signal 9 (SIGKILL)"), 4 crashes that
--        make a job a poison pill, 5 index into the lease index to start
--        from (batches of 1000).
-- Effects per job owned by ARGV[2]: DEL owned, SET last_modified (as
--        taskflow's abandon); the attempt and a crash are counted; the job
--        goes back to ready, or to the trash when its attempts are used up
--        or it has killed its worker ARGV[4] times; PUBLISH notify.
-- Returns: {'ok', recovered, trashed, next index or -1 when done}

local owner, reason, poison, start = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local s, us = now()
local recovered, trashed = 0, 0
local ids = redis.call('ZRANGE', K_LEASES, start, start + 999)
local removed = 0
for _, id in ipairs(ids) do
  if redis.call('GET', owned_key(id)) == owner then
    removed = removed + 1
    redis.call('DEL', owned_key(id))
    redis.call('SET', modified_key(id), oslo_datetime(s, us))
    redis.call('ZREM', K_LEASES, id)
    local job = job_key(id)
    redis.call('HDEL', job, 'owner')
    local crashes = redis.call('HINCRBY', job, 'crashes', 1)
    if crashes >= poison then
      redis.call('HINCRBY', job, 'attempts', 1)
      trash_job(id, 'poison pill: killed its worker ' .. crashes .. ' times (last: ' .. reason .. ')', s, us)
      trashed = trashed + 1
    elseif count_attempt(id, reason, s, us) then
      trashed = trashed + 1
    else
      make_ready(id)
      recovered = recovered + 1
    end
  end
end
if recovered > 0 then redis.call('PUBLISH', NS .. 'jw.notify', 'ready') end
local next_start = -1
if #ids == 1000 then next_start = start + 1000 - removed end
return {'ok', recovered, trashed, next_start}
