-- lib/msgpack.lua: taskflow's wire encodings: msgpack integers and oslo
-- datetimes, byte for byte as msgpack-python writes them.

-- msgpack encoding of a non-negative integer in its smallest form, as
-- msgpack-python writes it (big-endian, by Redis' struct library).
local function mp_uint(n)
  if n < 128 then return string.char(n)
  elseif n < 256 then return '\204' .. string.char(n)
  elseif n < 65536 then return '\205' .. struct.pack('>I2', n)
  elseif n < 4294967296 then return '\206' .. struct.pack('>I4', n)
  else return '\207' .. struct.pack('>I8', n) end
end

-- oslo msgpackutils datetime (ext type 1, naive UTC) for a Unix time: the
-- map {day, month, year, hour, minute, second, microsecond} in the order
-- msgpack-python writes it. Every value but the year (a uint16 from year
-- 256 to 65535) and the microseconds is below 128, one byte as it is, so
-- the map up to the microseconds' value is one string.char: a third
-- cheaper than an mp_uint per value and a 16-part concat. `(a - a % b) /
-- b` is a / b rounded down without a call (Lua's % rounds toward minus
-- infinity). The last one made is kept for the call (a post that hands
-- its job off makes the same one twice), and the map up to the
-- microseconds of the last second asked is kept across calls (in a
-- library; a script builds it each call): a pure function of the second,
-- which every call in that second would build again (about 14,700
-- instructions, a tenth of a lone post, against 4,000 with it kept).
local dt_s, dt_us, dt_text = nil, nil, nil
local dt_second = {}
local function oslo_datetime(s, us)
  if s == dt_s and us == dt_us then return dt_text end
  local map = dt_second[1] == s and dt_second[2]
  if not map then
    local secs = s % 86400
    -- The civil date (Howard Hinnant's civil_from_days): z counts days
    -- from 0000-03-01, doe the day of its 400-year era, yoe the year of
    -- the era.
    local z = (s - secs) / 86400 + 719468
    local doe = z % 146097
    local era = (z - doe) / 146097
    local yoe = doe - (doe - doe % 1460) / 1460 + (doe - doe % 36524) / 36524 - (doe - doe % 146096) / 146096
    yoe = (yoe - yoe % 365) / 365
    local doy = doe - (365 * yoe + (yoe - yoe % 4) / 4 - (yoe - yoe % 100) / 100)
    local mp = 5 * doy + 2
    mp = (mp - mp % 153) / 153
    local day = 153 * mp + 2
    day = doy - (day - day % 5) / 5 + 1
    local month = mp < 10 and mp + 3 or mp - 9
    local year = yoe + era * 400 + (month <= 2 and 1 or 0)
    local of_hour = secs % 3600
    map = string.char(1, 135,
      163, 100, 97, 121, day,                       -- 'day'
      165, 109, 111, 110, 116, 104, month,          -- 'month'
      164, 121, 101, 97, 114, 205, (year - year % 256) / 256, year % 256, -- 'year'
      164, 104, 111, 117, 114, (secs - of_hour) / 3600, -- 'hour'
      166, 109, 105, 110, 117, 116, 101, (of_hour - of_hour % 60) / 60, -- 'minute'
      166, 115, 101, 99, 111, 110, 100, of_hour % 60, -- 'second'
      171) .. 'microsecond'
    dt_second[1], dt_second[2] = s, map
  end
  local micro = mp_uint(us)
  -- The ext's header: its type and length (the map's 55 bytes up to the
  -- microseconds' value, then that value).
  dt_s, dt_us, dt_text = s, us, string.char(199, 55 + #micro) .. map .. micro
  return dt_text
end
