-- extend.lua: extends a held lease (the heartbeat; taskflow's extend_expiry
-- plus an owner and fencing-token check).
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1 NS prefix, 2 job id, 3 owner string, 4 fencing token ('0' = no
--        token check, for claims made by taskflow), 5 expiry ms (> 0).
-- Effects: PEXPIRE NS:<id>.owned; new lease deadline.
-- Returns: {'ok'} | {'not_found'} | {'not_owner', current owner or ''}

local id, who, token, expiry_ms = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local refused = check_listed_lease(id, who, token)
if refused then return refused end
local _, _, now_ms = now()
redis.call('PEXPIRE', owned_key(id), expiry_ms)
redis.call('ZADD', K_LEASES, now_ms + expiry_ms, id)
return {'ok'}
