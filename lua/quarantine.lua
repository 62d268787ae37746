-- quarantine.lua: moves an undecodable posting out of the listings into
-- the quarantine hash with the reason (never deletes it).
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 hash field, 3 the exact bytes read (moved only if
--        unchanged), 4 reason.
-- Effects: HSET quarantine, HSET quarantine.reason, HDEL listings, and the
--        field's index entries are dropped.
-- Returns: {'ok', 1} when moved, {'ok', 0} when the posting had changed or
--        was gone.

local field = ARGV[2]
if redis.call('HGET', K_LISTINGS, field) ~= ARGV[3] then return {'ok', 0} end
redis.call('HSET', K_QUARANTINE, field, ARGV[3])
redis.call('HSET', K_QREASON, field, ARGV[4])
redis.call('HDEL', K_LISTINGS, field)
redis.call('ZREM', K_READY, field)
redis.call('ZREM', K_SCHEDULED, field)
redis.call('ZREM', K_LEASES, field)
return {'ok', 1}
