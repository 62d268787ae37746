-- tag.lua: adds or removes tags of a job.
--
-- include: time, tags, lean
-- KEYS:  tags listings ready.
--        (queue keys, in this order: README.md; per-job keys are
--        built inside from NS, so they carry the queue's hash tag)
-- ARGV:  1-3 NS prefix, queue, event prefix; 4 'add' | 'remove', 5 job id,
--        then tags.
-- Effects: the job hash's tag list, each tag's job index and the queue's
--        tag counts.
-- Returns: {'ok', tags as JSON} | {'not_found'}

local mode, id = ARGV[4], ARGV[5]
local job = job_key(id)
adopt(id)
if redis.call('EXISTS', job) == 0 then return {'not_found'} end
local _, _, now_ms = now()
local tags, has = {}, {}
for _, tag in ipairs(tags_of(id)) do
  tags[#tags + 1] = tag
  has[tag] = true
end
for i = 6, #ARGV do
  local tag = ARGV[i]
  if mode == 'add' and not has[tag] then
    tags[#tags + 1] = tag
    has[tag] = true
    redis.call('ZADD', tag_key(tag), now_ms, id)
    redis.call('ZINCRBY', K_TAGS, 1, tag)
  elseif mode == 'remove' and has[tag] then
    has[tag] = nil
    for k, t in ipairs(tags) do
      if t == tag then table.remove(tags, k) break end
    end
    redis.call('ZREM', tag_key(tag), id)
    if tonumber(redis.call('ZINCRBY', K_TAGS, -1, tag)) <= 0 then redis.call('ZREM', K_TAGS, tag) end
  end
end
local encoded = #tags > 0 and cjson.encode(tags) or '[]'
redis.call('HSET', job, 'tags', encoded)
return {'ok', encoded}
