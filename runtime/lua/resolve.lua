-- resolve.lua: marks dependencies in other queues as met (the second half
-- of a cross-queue release: consume.lua left them in that queue's outbox,
-- or they were already consumed when the dependent was posted).
-- Idempotent.
--
-- include: time, deps
-- KEYS:  listings ready scheduled waiting outbox tracked.
--        (queue keys of the dependents' queue, in this order: README.md;
--        per-job keys are built inside from NS, so they carry the queue's
--        hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; then pairs (waiting job id,
--        dependency "queue\nid").
-- Effects: per pair the dependency leaves the job's set; a job with none
--        left is released (listed, then ready or scheduled).
-- Returns: {'ok', released}

local _, _, now_ms = now()
local released = 0
for i = 4, #ARGV - 1, 2 do
  if resolve_dep(ARGV[i], ARGV[i + 1], now_ms) then released = released + 1 end
end
if released > 0 then notify() end
return {'ok', released}
