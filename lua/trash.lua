-- trash.lua: gives a job up (taskflow's trash): the posting moves to the
-- trash hash byte for byte, with the reason on the job.
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 job id, 3 owner string, 4 fencing token ('0' = no
--        token check), 5 reason.
-- Effects: HSET trash, SET last_modified, DEL owned, HDEL listings
--        (taskflow's order; last_modified stays, as in taskflow).
-- Returns: {'ok'} | {'not_found'} | {'not_owner', current owner or ''}

local id, who, token = ARGV[2], ARGV[3], ARGV[4]
local refused = check_listed_lease(id, who, token)
if refused then return refused end
local s, us = now()
trash_job(id, ARGV[5], s, us)
return {'ok'}
