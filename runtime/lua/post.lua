-- post.lua: posts jobs (taskflow's post, plus jobworker's index). Takes a
-- batch: bulk posts cost one call per batch.
--
-- include: time, msgpack, posting, handoff
-- KEYS:  listings sequence trash ready scheduled leases completed cancelled
--        waiting tags failed outbox tracked trashed queue idle.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 notify channel; 5 how
--        the jobs follow: 'each', then per job 9 values: job id, posting
--        head, posting tail (codec::posting_parts), priority (int), max
--        attempts, delay ms on the server's clock (0 = none), job name
--        (kept in the job hash for history after the posting is gone),
--        extras (JSON or ''): tags, track, unique {key, ttl}, deps
--        ["queue\nid", …], fresh ('1' when the client generated the id, a
--        uuid4: no earlier life of it to look for; else ''); or 'shared',
--        then the last six of those once, the same for every job of the
--        call, then per job its first three (a bulk post of alike jobs:
--        each value sent costs the server more than its bytes). At most
--        1000 jobs. A call sent again after its reply was lost says
--        'each again <ms>' or 'shared again <ms>': at most that long since
--        it was first sent (see post_job).
-- Effects: one INCR of the sequence (a lone job), or INCRBY by the
--        batch's size; per job (lib/posting.lua's post_job): listings id = head
--        .. created_on(TIME) .. tail .. sequence (taskflow's exact bytes)
--        unless the job waits for dependencies (then the posting is kept in
--        the job hash until they are met); job hash; ready, scheduled or
--        waiting index (one ZADD of the batch's plain ready jobs); tags,
--        tracking, unique key; 'posted' event. Then
--        ready jobs are handed to idle workers registered for it (one
--        each, lib/handoff.lua; a lone plain job posted to an empty queue
--        goes to the first one without passing through the ready index,
--        and is indexed when nobody takes it). One PUBLISH notify when the ready index
--        was empty before and still holds jobs (idle workers wait on it)
--        or a job is scheduled (waiting workers re-arm timers).
-- Returns: {'ok', status, value, …}, one pair per job: 'ready' |
--        'scheduled' | 'waiting' (value: sequence), 'exists' (the id is
--        already on the board; 0), 'again' (posted by the first sending
--        of this call; 0; or 'waiting' with its sequence for a job still
--        waiting, whose caller then links its dependencies in other
--        queues), 'duplicate' (value: the id holding the
--        unique key), 'bad_dependency' (value: a dependency of this queue
--        that does not exist or was cancelled).

local s, us, now_ms = now()
local created = oslo_datetime(s, us)
local was_empty = redis.call('ZCARD', K_READY) == 0
local scheduled, ready = false, false
local out = {'ok'}
-- One INCRBY takes the batch's sequence numbers (a job refused leaves a
-- gap: taskflow only orders by them).
local mode, again = ARGV[5], nil
if #mode > 6 then
  local window
  mode, window = mode:match('^(%a+) again (%d+)$')
  again = tonumber(window)
end
local shared = mode == 'shared'
local first, step = 6, 9
if shared then first, step = 12, 3 end
local n = math.floor((#ARGV - first + 1) / step)
-- (A lone job's INCR sends no number: redis.call formats one with '%.17g'.)
local seq = 0
if n == 1 then seq = redis.call('INCR', K_SEQUENCE) - 1
elseif n > 1 then seq = redis.call('INCRBY', K_SEQUENCE, n) - n end
-- Ready jobs without extras are indexed with one ZADD; the jobs before
-- one with extras are indexed first, because a job with extras touches
-- keys outside the queue's (a tag key of another type…) and can fail the
-- call, which keeps what ran before it.
local ready_batch = {}
local known = nil
local function index_batch()
  if #ready_batch > 0 then
    redis.call('ZADD', K_READY, unpack(ready_batch))
    ready_batch = {}
  end
end
for i = first, #ARGV - step + 1, step do
  -- Where this job's priority and the five values after it are.
  local v = shared and 6 or i + 3
  local batch = ready_batch
  if ARGV[v + 4] ~= '' then
    index_batch()
    batch = nil
  end
  local extra = ARGV[v + 4] ~= '' and cjson.decode(ARGV[v + 4]) or nil
  local fresh = ARGV[v + 5] == '1'
  seq = seq + 1
  local status, value, posting, lean = post_job(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[v], ARGV[v + 1], ARGV[v + 2],
    ARGV[v + 3], extra, created, now_ms, seq, fresh, batch, again)
  if n == 1 and was_empty and posting and #ready_batch == 2 then
    -- A lone plain job to an empty queue (an idle worker's pickup): it
    -- goes to the hand-off as it is, indexed only if nobody takes it.
    known = {id = ARGV[i], score = ready_batch[1], posting = posting, fresh = fresh,
      fields = {false, ARGV[v + 1], ARGV[v], false, false, ms_text(now_ms)},
      facts = lean and {ARGV[v + 3], ms_text(now_ms), int(seq)} or nil}
  end
  scheduled = scheduled or status == 'scheduled'
  ready = ready or status == 'ready'
  out[#out + 1] = status
  out[#out + 1] = value
end
local handed = false
if known then
  handed = hand_off(s, us, now_ms, known)
  if not known.used then index_batch() end
else
  index_batch()
  handed = ready and hand_off(s, us, now_ms)
end
-- (A lone job handed off left the ready index as empty as it was.)
if scheduled or (ready and was_empty and (not handed or (not known and redis.call('ZCARD', K_READY) > 0))) then
  redis.call(PUBLISH, ARGV[4], 'posted')
end
return out
