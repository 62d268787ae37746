-- lib/tags.lua: a job's tags.
-- include: keys

-- Tags of a job (its hash keeps them as a JSON array).
local function tags_of(id)
  local t = redis.call('HGET', job_key(id), 'tags')
  if not t or t == '[]' then return {} end
  return cjson.decode(t)
end
