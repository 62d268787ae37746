-- purge.lua: deletes trashed jobs for good (taskflow's trash entry, the
-- failure group entry and all jobworker state).
--
-- KEYS:  the queue keys (README.md).
-- ARGV:  1-3 NS prefix, queue, event prefix; then job ids (at most 1000).
-- Returns: {'ok', status, …}, one per job: 'ok' | 'not_found'.

local out = {'ok'}
for i = 4, #ARGV do
  local id = ARGV[i]
  if redis.call('HDEL', K_TRASH, id) == 0 then
    out[#out + 1] = 'not_found'
  else
    local group = redis.call('HGET', job_key(id), 'group')
    if group then
      redis.call('ZREM', failed_key(group), id)
      if tonumber(redis.call('ZINCRBY', K_FAILED, -1, group)) <= 0 then redis.call('ZREM', K_FAILED, group) end
    end
    redis.call('DEL', modified_key(id))
    forget_job(id)
    out[#out + 1] = 'ok'
  end
end
return out
