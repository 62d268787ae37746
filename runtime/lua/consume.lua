-- consume.lua: jobs are done (taskflow's consume), kept in a bounded
-- history. Takes a batch: one call settles every finished job of a queue.
--
-- include: consume_jobs, stats
-- KEYS:  listings trash ready scheduled leases completed waiting queue tags
--        failed outbox tracked trashed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 history count limit (0 =
--        keep no history; '<limit> again' when the call is sent again
--        because its reply was lost), then triples (job id, owner string, fencing
--        token ('0' = no token check)), at most 1000.
-- Effects per job whose lease is held: DEL owned and last_modified, HDEL
--        listings (taskflow's effects); lease index entry removed; the job
--        added to the history index (pruned by claim.lua; its entry is
--        what says completed, the job hash is left as it is), or deleted
--        when no history is kept; run time counted
--        in today's statistics; 'consumed' event; dependents released
--        (this queue's at once, other queues' through the outbox). Under a
--        claim made outside jobworker (token '0'), the job also leaves
--        the ready index, and a lean one gets its hash from its posting
--        first (lean.lua's adopt).
--        Sent again, a job the first sending consumed (completed, its
--        hash naming the same owner and token) is 'ok' and nothing more
--        is done to it; with no history kept its hash is gone, and it is
--        'not_found'.
-- Returns: {'ok', status, owner, status, owner, …, outbox}, one pair per
--        job: status 'ok' | 'not_found' | 'cancelled' | 'not_owner' (owner:
--        the current owner, or ''); outbox = releases owed to other queues.

local _, _, now_ms = now()
local out = {'ok'}
local keep = tonumber(ARGV[4])
local again = keep == nil
if again then keep = tonumber(ARGV[4]:match('^(%d+) again$')) end
add_stats(consume_jobs(out, ARGV, 5, keep, now_ms, again), nil, now_ms)
out[#out + 1] = redis.call('SCARD', K_OUTBOX)
return out
