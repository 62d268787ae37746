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

-- oslo msgpackutils datetime (ext type 1, naive UTC) for a Unix time.
local function oslo_datetime(s, us)
  local days = math.floor(s / 86400)
  local secs = s - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
    - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local day = doy - math.floor((153 * mp + 2) / 5) + 1
  local month = mp < 10 and mp + 3 or mp - 9
  local year = yoe + era * 400 + (month <= 2 and 1 or 0)
  local payload = '\135'
    .. '\163day' .. mp_uint(day)
    .. '\165month' .. mp_uint(month)
    .. '\164year' .. mp_uint(year)
    .. '\164hour' .. mp_uint(math.floor(secs / 3600))
    .. '\166minute' .. mp_uint(math.floor(secs % 3600 / 60))
    .. '\166second' .. mp_uint(secs % 60)
    .. '\171microsecond' .. mp_uint(us)
  return '\199' .. string.char(#payload) .. '\1' .. payload
end
