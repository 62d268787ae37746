-- purge.lua: deletes trashed jobs for good (taskflow's trash entry, the
-- failure group entry and all jobworker state).
--
-- include: retention
-- KEYS:  trash tags failed tracked trashed ready.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; then job ids (at most 1000).
-- Returns: {'ok', status, …}, one per job: 'ok' | 'not_found'.

local out = {'ok'}
for i = 4, #ARGV do
  out[#out + 1] = purge_trashed(ARGV[i]) and 'ok' or 'not_found'
end
return out
