-- recur_spawn.lua: posts the runs of a recurring job that are due, once
-- per slot however many workers race: the caller read the template's
-- next slot and computed the due slots from its rule; the script posts
-- them only if that next slot is still the template's (compare and set).
--
-- include: time, msgpack, posting
-- KEYS:  listings sequence trash ready scheduled leases completed cancelled
--        waiting tags failed recurring outbox tracked trashed.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 template id, 5 the next
--        slot (ms) the caller read, 6 the new next slot, then per run 3
--        values: job id, posting head, posting tail.
-- Effects: each run posted like post.lua (ready, with the template's
--        name, priority, attempts and tags); the template's next slot and
--        run count updated; notify.
-- Returns: {'ok', runs posted} (0 when another worker was first or the
--        template is gone).

local tid, seen, next_slot = ARGV[4], ARGV[5], tonumber(ARGV[6])
local tpl = NS .. 'jw.recur.' .. tid
local t = redis.call('HMGET', tpl, 'next', 'name', 'prio', 'max', 'tags')
if not t[1] or t[1] ~= seen then return {'ok', 0} end
local s, us, now_ms = now()
local created = oslo_datetime(s, us)
local extra = t[5] and {tags = cjson.decode(t[5])} or nil
local posted = 0
for i = 7, #ARGV - 2, 3 do
  local status = post_job(ARGV[i], ARGV[i + 1], ARGV[i + 2], t[3], t[4], 0, t[2], extra, created, now_ms)
  if status == 'ready' then posted = posted + 1 end
end
redis.call('HSET', tpl, 'next', next_slot)
redis.call('HINCRBY', tpl, 'runs', posted)
redis.call('ZADD', K_RECURRING, next_slot, tid)
if posted > 0 then notify() end
return {'ok', posted}
