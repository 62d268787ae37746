-- lib/time.lua: the server's clock (Redis TIME, never the client's).

-- Server time: seconds, microseconds, milliseconds.
local function now()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s, us, s * 1000 + math.floor(us / 1000)
end

-- An integer as decimal text. Redis turns a Lua number passed to
-- redis.call into text with '%.17g', whose float formatting took about 7 %
-- of the server's time in a drain (perf, symbolized redis-server): the hot
-- paths pass integers as text instead.
local function int(n)
  return string.format('%d', n)
end

-- The text of a time in ms, formatted once per script call (a call uses
-- one time for all its jobs).
local ms_ms, ms_text_of = nil, nil
local function ms_text(ms)
  if ms ~= ms_ms then ms_ms, ms_text_of = ms, int(ms) end
  return ms_text_of
end
