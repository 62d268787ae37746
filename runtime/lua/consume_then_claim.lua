-- consume_then_claim.lua: a worker's settle-and-take step on one queue in
-- one call: consume.lua's consume, then claim.lua's claim, at one server
-- time. What the two calls did twice is done once: the clock, the check
-- for event listeners, the outbox count, the statistics' update (and the
-- call itself).
--
-- include: consume_jobs, claim_jobs
-- KEYS:  listings trash ready scheduled leases completed waiting queue tags
--        failed recurring outbox tracked trashed idle.
--        (queue keys, in this order: README.md)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4-15 claim.lua's (15 is
--        '1' on a cluster only: one server's board sends claim.lua again
--        instead); 16 history count limit (0 = keep no
--        history), then triples (job id, owner string, fencing token ('0'
--        = no token check)), at most 1000, as consume.lua's.
-- Effects: consume.lua's for the triples, then claim.lua's; the run times
--        of the jobs consumed are written with the claim's wait times, or
--        alone when the claim fails (Redis keeps the consumes: a script's
--        writes before an error stay), and then the claim's error is the
--        call's.
-- Returns: {consumed, claimed}: consume.lua's reply and claim.lua's.

local s, us, now_ms = now()
local consumed = {'ok'}
local runs = consume_jobs(consumed, ARGV, 17, tonumber(ARGV[16]), now_ms)
local ok, claimed = pcall(claim_jobs, ARGV, s, us, now_ms, runs)
if not ok then
  if not runs_written then add_stats(runs, nil, now_ms) end
  error(claimed, 0)
end
-- claim.lua's outbox count, read after the consume.
consumed[#consumed + 1] = claimed[4]
return {consumed, claimed}
