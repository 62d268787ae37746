-- trash.lua: gives a job up (taskflow's trash): the posting moves to the
-- trash hash byte for byte, with the reason on the job.
--
-- include: time, lease, failure
-- KEYS:  listings trash ready scheduled leases queue failed tracked trashed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 job id, 5 owner string, 6 fencing token ('0' = no
--        token check), 7 reason.
-- Effects: HSET trash, SET last_modified, DEL owned, HDEL listings
--        (taskflow's order; last_modified stays, as in taskflow).
-- Returns: {'ok'} | {'not_found'} | {'cancelled'} | {'not_owner', current
--        owner or ''}

local id, who, token = ARGV[4], ARGV[5], ARGV[6]
local refused = check_listed_lease(id, who, token)
if refused then return refused end
local s, us, now_ms = now()
trash_job(id, ARGV[7], s, us, now_ms)
lease_freed()
return {'ok'}
