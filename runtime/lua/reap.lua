-- reap.lua: promotes due scheduled jobs and recovers expired leases
-- without claiming (claim.lua does the same first).
--
-- include: time, maintenance
-- KEYS:  listings trash ready scheduled leases completed waiting failed
--        outbox tracked trashed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix.
-- Effects: see promote() and recover() in lib/maintenance.lua; one bounded batch
--        of each.
-- Returns: {'ok', promoted, stalled}

local s, us, now_ms = now()
local promoted = promote(now_ms)
local stalled = recover(s, us, now_ms)
return {'ok', promoted, stalled}
