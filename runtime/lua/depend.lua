-- depend.lua: registers a job of another queue as a dependent of jobs of
-- this queue (the second half of posting with cross-queue dependencies).
--
-- include: state, deps
-- KEYS:  listings ready scheduled leases waiting outbox tracked completed.
--        (queue keys of the dependencies' queue, in this order: README.md;
--        per-job keys are built inside from NS, so they carry the queue's
--        hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 the dependent
--        ("queue\nid"), then dependency ids.
-- Effects: the dependent is added to each unfinished dependency's set.
-- Returns: {'ok', status, …}, one per dependency: 'pending' (registered)
--        | 'done' (already consumed) | 'missing' (no such job, or
--        cancelled).

local out = {'ok'}
for i = 5, #ARGV do
  local state = state_of(ARGV[i])
  if not state or state == 'cancelled' then
    out[#out + 1] = 'missing'
  elseif state == 'completed' then
    out[#out + 1] = 'done'
  else
    add_dependent(ARGV[i], ARGV[4])
    out[#out + 1] = 'pending'
  end
end
return out
