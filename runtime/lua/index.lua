-- index.lua: indexes jobs that reached the listings without jobworker
-- (posted by taskflow), so that claim finds them in order.
--
-- include: time, foreign, ready
-- KEYS:  listings trash ready scheduled leases completed waiting outbox
--        tracked trashed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 max attempts for these jobs, then triples
--        (id, priority, sequence) decoded from the postings by the caller.
-- Effects: for each id still listed, without a job hash and not in the
--        ready index (a lean job, lib/lean.lua): job hash, then
--        the ready index, or the lease index when taskflow holds a claim;
--        notify when any was indexed (waiting workers claim at once).
-- Returns: {'ok', number indexed}

local _, _, now_ms = now()
local indexed = 0
for i = 5, #ARGV - 2, 3 do
  local id = ARGV[i]
  local job = job_key(id)
  if redis.call('HEXISTS', K_LISTINGS, id) == 1 and redis.call('EXISTS', job) == 0
      and not redis.call('ZSCORE', K_READY, id) then
    redis.call('HSET', job, 'prio', ARGV[i + 1], 'seq', ARGV[i + 2], 'max', ARGV[4],
      'attempts', 0, 'token', 0)
    if redis.call('EXISTS', owned_key(id)) == 1 then
      redis.call('HSET', job, 'state', 'claimed')
      park_foreign(id, now_ms)
    else
      make_ready(id, now_ms)
    end
    indexed = indexed + 1
  end
end
if indexed > 0 then notify() end
return {'ok', indexed}
