-- lib/events.lua: job events as JSON, published only while someone listens.
-- include: keys

-- Whether the queue tracks any job, read once per script (most track
-- none, and then no event needs a per-job lookup).
local any_tracked = nil

-- A JSON string (cjson only when something needs escaping: ids, queue
-- and worker names rarely do, and events are on every hot path).
local function json_str(s)
  if s:find('[%c"\\]') then return cjson.encode(s) end
  return '"' .. s .. '"'
end

-- An event as a JSON object: event, queue, job, at, then `fields`
-- (strings and integers).
local function event_json(id, now_ms, event, fields)
  local parts = {'{"event":"', event, '","queue":', json_str(QUEUE), ',"job":', json_str(id),
    ',"at":', string.format('%d', now_ms)}
  for k, v in pairs(fields or {}) do
    parts[#parts + 1] = ',"' .. k .. '":'
    parts[#parts + 1] = type(v) == 'number' and string.format('%d', v) or json_str(tostring(v))
  end
  parts[#parts + 1] = '}'
  return table.concat(parts)
end

-- Whether anyone listens to the event channels, read once per script:
-- publishing is a good part of a job's server time, so nobody listening
-- means no event is built or sent. (Pattern subscribers count as
-- listening. On a cluster, the log is the queue's own sharded channel
-- and tracked jobs' events share one, `EVENTS:ev`: there are no sharded
-- patterns.)
local listening = nil

-- Whether anyone listens or the job is tracked: an event about job `id`
-- would be sent. The hot paths ask before they build an event's fields,
-- so that a job nobody watches costs no table. A job `new` to the board
-- (posted by this call under an id its client just generated, without
-- extras) cannot be tracked: it costs no look at the tracked set.
local function heard(id, new)
  if listening == nil then
    listening = (not CLUSTER and redis.call('PUBSUB', 'NUMPAT') > 0) or subscribers(EVENTS .. ':log') > 0
  end
  if new then return listening end
  if any_tracked == nil then any_tracked = redis.call('ZCARD', K_TRACKED) > 0 end
  return listening or (any_tracked and redis.call('ZSCORE', K_TRACKED, id) ~= false)
end

-- Publishes an event (`msg`, or built from the rest when nil): on the log
-- channel, and on the event's own channel when the job is tracked.
local function publish(id, now_ms, event, fields, msg)
  if not heard(id) then return end
  local tracked = any_tracked and redis.call('ZSCORE', K_TRACKED, id)
  msg = msg or event_json(id, now_ms, event, fields)
  if listening then redis.call(PUBLISH, EVENTS .. ':log', msg) end
  if tracked then redis.call(PUBLISH, CLUSTER and EVENTS .. ':ev' or EVENTS .. ':ev:' .. event, msg) end
end
