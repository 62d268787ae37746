-- lib/lean.lua: lean jobs, posted without a job hash. A plain ready job
-- under a generated id, with the default priority and attempts, is only
-- its listing and its place in the ready index: its posting tells what
-- the hash would (name, post time, sequence). Its first claim writes
-- them to the hash with the lease's fields; a verb that writes the hash
-- of a job still ready writes the post's fields first (adopt). A lean
-- job's hash gets no `prio` and `max` (0 and LEAN_MAX) unless a verb
-- writes them: one without `max` and `token` (it may hold `dependents`
-- already) is a lean job not claimed yet.
-- include: keys, time

-- A lean job's max attempts: crate::job::DEFAULT_MAX_ATTEMPTS (a test
-- holds them equal).
local LEAN_MAX = '5'

-- Where the msgpack str at `pos` of `s` begins, and its length.
local function str_span(s, pos)
  local b = s:byte(pos)
  if not b then return nil end
  if b >= 160 and b <= 191 then return pos + 1, b - 160 end
  if b == 217 then return pos + 2, s:byte(pos + 1) end
  if b == 218 then
    local b1, b2 = s:byte(pos + 1, pos + 2)
    return pos + 3, b1 * 256 + b2
  end
  if b == 219 then
    local b1, b2, b3, b4 = s:byte(pos + 1, pos + 4)
    return pos + 5, ((b1 * 256 + b2) * 256 + b3) * 256 + b4
  end
  return nil
end

-- The msgpack uint at `pos` of `s`.
local function uint_at(s, pos)
  local b = s:byte(pos)
  if not b or b < 128 then return b end
  if b == 204 then return s:byte(pos + 1) end
  if b == 205 then
    local b1, b2 = s:byte(pos + 1, pos + 2)
    return b1 * 256 + b2
  end
  if b == 206 then
    local b1, b2, b3, b4 = s:byte(pos + 1, pos + 4)
    return ((b1 * 256 + b2) * 256 + b3) * 256 + b4
  end
  if b ~= 207 then return nil end
  local v = 0
  for k = pos + 1, pos + 8 do v = v * 256 + s:byte(k) end
  return v
end

-- The name, post time (ms text) and sequence (text) that a posting
-- written by post.lua tells: {name, posted, seq}, or nil when its bytes
-- are not laid out so. post.lua writes the map's keys in this order:
-- uuid, name, priority, created_on (lib/msgpack.lua's oslo_datetime, at
-- the post's time), details, (book,) sequence. (A claim parses each lean
-- job it takes: the reads are few and batched, about 1 µs a posting.)
local function posting_facts(p)
  local at, n = str_span(p, 7) -- the uuid, after the map's byte and 'uuid'
  if not at then return nil end
  local name_at, name_n = str_span(p, at + n + 5)
  if not name_at then return nil end
  at, n = str_span(p, name_at + name_n + 9)
  if not at then return nil end
  local e = at + n + 11 -- the datetime ext, after 'created_on'
  local ext, _, one, map = p:byte(e, e + 3)
  local year_mark, year_hi, year_lo = p:byte(e + 21, e + 23)
  if ext ~= 199 or one ~= 1 or map ~= 135 or year_mark ~= 205 or p:byte(e + 46) ~= 171 then return nil end
  local us = uint_at(p, e + 58)
  local k = p:find('\168sequence', #p - 17, true)
  local seq = k and uint_at(p, k + 9)
  if not us or not seq then return nil end
  -- Days since 1970-01-01 (Howard Hinnant's days_from_civil).
  local day, month, year = p:byte(e + 8), p:byte(e + 15), year_hi * 256 + year_lo
  local y = month <= 2 and year - 1 or year
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local doy = math.floor((153 * (month > 2 and month - 3 or month + 9) + 2) / 5) + day - 1
  local days = era * 146097 + yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy - 719468
  local secs = days * 86400 + p:byte(e + 29) * 3600 + p:byte(e + 37) * 60 + p:byte(e + 45)
  return {p:sub(name_at, name_at + name_n - 1), int(secs * 1000 + math.floor(us / 1000)), int(seq)}
end

-- For a claim's read of a job hash, `v` = (attempts, max, prio, suspect,
-- token, ready_at): a lean job's max, and the ready time of one not
-- claimed yet, filled in from its `posting`; returns the facts its hash
-- gets at this first claim (posting_facts), else nil.
local function lean_view(v, posting)
  if v[2] then return nil end
  v[2] = LEAN_MAX
  if v[5] then return nil end
  local facts = posting_facts(posting)
  if facts then v[6] = facts[2] end
  return facts
end

-- Writes a claim's fields to job hash `job`, and with `facts` (a lean
-- job's) the post's fields too, in one HSET (not its default `prio` and
-- `max`: each field costs the server about 0.3 µs).
local function write_claim(job, token, who, now_txt, by, facts)
  if facts then
    redis.call('HSET', job, 'token', token, 'owner', who, 'claimed_at', now_txt, 'claimed_by', by,
      'name', facts[1], 'seq', facts[3], 'posted', facts[2])
  else
    redis.call('HSET', job, 'token', token, 'owner', who, 'claimed_at', now_txt, 'claimed_by', by)
  end
end

-- Whether job `id`'s hash (if any) is a lean job's before its first
-- claim: without `max` and `token`.
local function unclaimed_lean(id)
  local v = redis.call('HMGET', job_key(id), 'max', 'token')
  return not v[1] and not v[2]
end

-- Writes the fields a lean job's post would have written to its hash.
local function write_posted(id, facts)
  redis.call('HSET', job_key(id), 'name', facts[1], 'prio', '0', 'seq', facts[3], 'max', LEAN_MAX,
    'posted', facts[2], 'ready_at', facts[2])
end

-- Before a verb writes or reads the hash of job `id`: when it is a lean
-- job not claimed yet (in the ready index, unclaimed_lean), writes the
-- hash its post would have written, from `posting` (read from the
-- listings when not given).
local function adopt(id, posting)
  if not unclaimed_lean(id) or not redis.call('ZSCORE', K_READY, id) then return end
  posting = posting or redis.call('HGET', K_LISTINGS, id)
  local facts = posting and posting_facts(posting)
  if facts then write_posted(id, facts) end
end

-- A job taken out of the ready index whose listing vanished behind our
-- back (lib/foreign.lua): when it was lean, its hash gets what the
-- trash's copy of its posting tells (taskflow trashed it), or at least
-- its `max` (taskflow consumed it: its name and post time went with the
-- posting), so that it is recorded as finished.
local function lean_vanished(id)
  if not unclaimed_lean(id) then return end
  local trashed = redis.call('HGET', K_TRASH, id)
  local facts = trashed and posting_facts(trashed)
  if facts then
    write_posted(id, facts)
  else
    redis.call('HSET', job_key(id), 'max', LEAN_MAX)
  end
end
