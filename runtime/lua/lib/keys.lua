-- lib/keys.lua: the common ARGV (NS prefix, queue, event prefix) and the
-- per-job key names built from NS (so they carry the queue's hash tag).
-- The queue keys a script takes (K_LISTINGS, K_READY, …) are bound by the
-- loader: from KEYS, in the order of the script's '-- KEYS:' line, or in
-- the Functions library from the keys it builds from NS.

local NS, QUEUE, EVENTS = ARGV[1], ARGV[2], ARGV[3]

local function owned_key(id) return NS .. id .. '.owned' end
local function modified_key(id) return NS .. id .. '.last_modified' end
local function job_key(id) return NS .. 'jw.job.' .. id end
local function history_key(id) return NS .. 'jw.history.' .. id end
local function deps_key(id) return NS .. 'jw.deps.' .. id end
local function dependents_key(id) return NS .. 'jw.dependents.' .. id end
local function tag_key(tag) return NS .. 'jw.tag.' .. tag end
local function failed_key(group) return NS .. 'jw.failed.' .. group end
-- Claimers by the lease deadline of their last claim call that got jobs
-- (lib/claim_jobs.lua).
local function took_key() return NS .. 'jw.took' end
local function stats_key(now_ms) return NS .. 'jw.stats.' .. math.floor(now_ms / 86400000) end
-- Pub/sub: on a Redis Cluster (CLUSTER, set by the loader) every channel
-- carries the queue's hash tag (EVENTS is then the queue's namespace) and
-- is sharded, so it lives on the queue's node.
local PUBLISH = CLUSTER and 'SPUBLISH' or 'PUBLISH'
local function subscribers(channel)
  return redis.call('PUBSUB', CLUSTER and 'SHARDNUMSUB' or 'NUMSUB', channel)[2]
end
local function notify() redis.call(PUBLISH, NS .. 'jw.notify', 'ready') end
