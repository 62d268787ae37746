-- lib/keys.lua: the queue keys (KEYS, in README.md's order), the common ARGV
-- (NS prefix, queue, event prefix) and the per-job key names built from
-- NS (so they carry the queue's hash tag).

local K_LISTINGS, K_SEQUENCE, K_TRASH = KEYS[1], KEYS[2], KEYS[3]
local K_READY, K_SCHEDULED, K_LEASES = KEYS[4], KEYS[5], KEYS[6]
local K_COMPLETED, K_QUARANTINE, K_QREASON = KEYS[7], KEYS[8], KEYS[9]
local K_WAITING, K_QUEUE, K_TAGS, K_FAILED = KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local K_RECURRING, K_OUTBOX, K_TRACKED, K_TRASHED = KEYS[14], KEYS[15], KEYS[16], KEYS[17]
local NS, QUEUE, EVENTS = ARGV[1], ARGV[2], ARGV[3]

local function owned_key(id) return NS .. id .. '.owned' end
local function modified_key(id) return NS .. id .. '.last_modified' end
local function job_key(id) return NS .. 'jw.job.' .. id end
local function history_key(id) return NS .. 'jw.history.' .. id end
local function deps_key(id) return NS .. 'jw.deps.' .. id end
local function dependents_key(id) return NS .. 'jw.dependents.' .. id end
local function tag_key(tag) return NS .. 'jw.tag.' .. tag end
local function failed_key(group) return NS .. 'jw.failed.' .. group end
local function stats_key(now_ms) return NS .. 'jw.stats.' .. math.floor(now_ms / 86400000) end
local function notify() redis.call('PUBLISH', NS .. 'jw.notify', 'ready') end
