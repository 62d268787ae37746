//! Reading, as oslo `msgpackutils.loads` reads: one whole value, refused
//! where Python would fail.

use rmpv::Value;

use super::ext;

/// Decodes one whole msgpack value the way `msgpackutils.loads` does, or
/// says why Python would fail: bad or truncated msgpack, the reserved byte
/// `c1`, trailing bytes, a str that is not UTF-8, a map key that is neither
/// str nor bin, an ext code below 0 other than the timestamp (-1), a bad
/// timestamp, or an oslo ext (0 to 7) whose handler would raise (see [`ext`]).
/// `depth` is how many more levels of nesting are allowed.
pub(super) fn oslo_loads(bytes: &[u8], depth: usize) -> Result<Value, String> {
    let mut reader = Reader { rest: bytes };
    let value = reader.value(depth)?;
    match reader.rest.len() {
        0 => Ok(value),
        n => Err(format!("not msgpack: {n} trailing bytes after the value")),
    }
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.rest.len() < n {
            return Err("not msgpack: unexpected end of data".into());
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    /// Reads a big-endian unsigned number of `n` (1, 2, 4 or 8) bytes.
    fn uint(&mut self, n: usize) -> Result<u64, String> {
        Ok(self.take(n)?.iter().fold(0, |acc, b| acc << 8 | u64::from(*b)))
    }

    /// Reads a length of `n` bytes.
    fn len(&mut self, n: usize) -> Result<usize, String> {
        usize::try_from(self.uint(n)?).map_err(|_| "not msgpack: length too large".to_string())
    }

    /// Reads one value. Containers are handled here and everything else in
    /// [`Self::scalar`], which keeps this recursive frame small.
    fn value(&mut self, depth: usize) -> Result<Value, String> {
        let depth = depth.checked_sub(1).ok_or("not msgpack: nested too deeply")?;
        let marker = self.take(1)?[0];
        match marker {
            0x80..=0x8f => self.map(usize::from(marker & 0x0f), depth),
            0x90..=0x9f => self.array(usize::from(marker & 0x0f), depth),
            0xdc | 0xdd => {
                let n = self.len(2 << (marker - 0xdc))?;
                self.array(n, depth)
            }
            0xde | 0xdf => {
                let n = self.len(2 << (marker - 0xde))?;
                self.map(n, depth)
            }
            0xc7..=0xc9 | 0xd4..=0xd8 => self.ext(marker, depth),
            _ => self.scalar(marker),
        }
    }

    #[inline(never)]
    fn scalar(&mut self, marker: u8) -> Result<Value, String> {
        let width = |base: u8| 1usize << (marker - base);
        Ok(match marker {
            0x00..=0x7f => Value::from(marker),
            0xa0..=0xbf => self.str(usize::from(marker & 0x1f))?,
            0xc0 => Value::Nil,
            0xc2 => Value::Boolean(false),
            0xc3 => Value::Boolean(true),
            0xc4..=0xc6 => {
                let n = self.len(width(0xc4))?;
                Value::Binary(self.take(n)?.to_vec())
            }
            0xca => Value::F32(f32::from_bits(self.uint(4)? as u32)),
            0xcb => Value::F64(f64::from_bits(self.uint(8)?)),
            0xcc..=0xcf => Value::from(self.uint(width(0xcc))?),
            0xd0..=0xd3 => {
                let bits = 64 - 8 * width(0xd0) as u32;
                Value::from(((self.uint(width(0xd0))? << bits) as i64) >> bits)
            }
            0xd9..=0xdb => {
                let n = self.len(width(0xd9))?;
                self.str(n)?
            }
            0xe0..=0xff => Value::from(marker as i8),
            // c1 is reserved; containers and exts never get here.
            _ => return Err(format!("not msgpack: reserved byte {marker:02x}")),
        })
    }

    fn str(&mut self, n: usize) -> Result<Value, String> {
        let text = std::str::from_utf8(self.take(n)?)
            .map_err(|_| "not msgpack: str is not valid utf-8".to_string())?;
        Ok(Value::from(text))
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, String> {
        // Each item takes at least one byte: cap the allocation by what is left.
        let mut items = Vec::with_capacity(n.min(self.rest.len()));
        for _ in 0..n {
            items.push(self.value(depth)?);
        }
        Ok(Value::Array(items))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, String> {
        let mut entries = Vec::with_capacity(n.min(self.rest.len() / 2));
        for _ in 0..n {
            let key = self.value(depth)?;
            if !matches!(key, Value::String(_) | Value::Binary(_)) {
                return Err("not msgpack: map key is neither str nor bin".into());
            }
            entries.push((key, self.value(depth)?));
        }
        Ok(Value::Map(entries))
    }

    /// Reads an ext (after its `marker`) and runs the check its decoder
    /// would run in Python.
    fn ext(&mut self, marker: u8, depth: usize) -> Result<Value, String> {
        let n = match marker {
            0xd4..=0xd8 => 1 << (marker - 0xd4),
            _ => self.len(1 << (marker - 0xc7))?,
        };
        let code = self.take(1)?[0] as i8;
        let data = self.take(n)?;
        ext::check_ext(code, data, depth)?;
        Ok(Value::Ext(code, data.to_vec()))
    }
}

/// The last value stored under the str key `key`, as a Python dict lookup
/// sees it (a bin key with the same bytes is a different key).
pub(super) fn map_get<'v>(entries: &'v [(Value, Value)], key: &str) -> Option<&'v Value> {
    entries
        .iter()
        .rev()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

/// Python truthiness of the decoded value.
pub(super) fn truthy(v: &Value) -> bool {
    match v {
        Value::Nil => false,
        Value::Boolean(b) => *b,
        Value::Integer(i) => i.as_i64() != Some(0),
        Value::F32(f) => *f != 0.0,
        Value::F64(f) => *f != 0.0,
        Value::String(s) => !s.as_bytes().is_empty(),
        Value::Binary(b) => !b.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Map(entries) => !entries.is_empty(),
        Value::Ext(..) => true,
    }
}
