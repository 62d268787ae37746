-- lib/time.lua: the server's clock (Redis TIME, never the client's).

-- Server time: seconds, microseconds, milliseconds.
local function now()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s, us, s * 1000 + math.floor(us / 1000)
end
