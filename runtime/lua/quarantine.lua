-- quarantine.lua: moves an undecodable posting out of the listings into
-- the quarantine hash with the reason (never deletes it).
--
-- include: keys
-- KEYS:  listings ready scheduled leases quarantine quarantine_reason.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 hash field, 5 the exact bytes read (moved only if
--        unchanged), 6 reason.
-- Effects: HSET quarantine, HSET quarantine.reason, HDEL listings, and the
--        field's index entries are dropped.
-- Returns: {'ok', 1} when moved, {'ok', 0} when the posting had changed or
--        was gone.

local field = ARGV[4]
if redis.call('HGET', K_LISTINGS, field) ~= ARGV[5] then return {'ok', 0} end
redis.call('HSET', K_QUARANTINE, field, ARGV[5])
redis.call('HSET', K_QUARANTINE_REASON, field, ARGV[6])
redis.call('HDEL', K_LISTINGS, field)
redis.call('ZREM', K_READY, field)
redis.call('ZREM', K_SCHEDULED, field)
redis.call('ZREM', K_LEASES, field)
return {'ok', 1}
