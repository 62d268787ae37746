-- overview.lua: one queue at a glance, read only (the web app's
-- dashboard, /metrics): its jobs by state and when the ready job that has
-- waited longest became ready.
--
-- include: ready, lean
-- KEYS:  ready scheduled waiting leases completed trash cancelled
--        quarantine queue listings.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix.
-- Effects: none.
-- Returns: {'ok', ready, scheduled, waiting, claimed, completed, trashed,
--        cancelled, quarantined, paused ('1' or ''), limit ('' for none),
--        oldest ready_at (ms, '' when none is ready)}.
--
-- The ready index is ordered by priority, then by sequence, so the head
-- of each priority band is the job of that band that has waited longest;
-- the oldest ready job is the oldest of the band heads (at most
-- MAX_BANDS bands are looked at: O(bands · log n)).

local MAX_BANDS = 32

local oldest = nil
local min = '-inf'
for _ = 1, MAX_BANDS do
  local head = redis.call('ZRANGEBYSCORE', K_READY, min, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #head == 0 then break end
  local at = redis.call('HGET', job_key(head[1]), 'ready_at')
  if not at then
    -- A lean job: ready since its post.
    local posting = redis.call('HGET', K_LISTINGS, head[1])
    local facts = posting and posting_facts(posting)
    at = facts and facts[2]
  end
  at = tonumber(at or '')
  if at and (not oldest or at < oldest) then oldest = at end
  local band = math.floor(tonumber(head[2]) / SEQ_SPAN)
  min = string.format('%.0f', (band + 1) * SEQ_SPAN)
end

local settings = redis.call('HMGET', K_QUEUE, 'paused', 'limit')
return {
  'ok',
  redis.call('ZCARD', K_READY),
  redis.call('ZCARD', K_SCHEDULED),
  redis.call('ZCARD', K_WAITING),
  redis.call('ZCARD', K_LEASES),
  redis.call('ZCARD', K_COMPLETED),
  redis.call('HLEN', K_TRASH),
  redis.call('ZCARD', K_CANCELLED),
  redis.call('HLEN', K_QUARANTINE),
  settings[1] and '1' or '',
  settings[2] or '',
  oldest and string.format('%.0f', oldest) or '',
}
