//! Encoders and decoders for taskflow's wire values.
//!
//! Taskflow stores its Redis postings with `oslo_serialization.msgpackutils`,
//! which is msgpack-python (`use_bin_type=True` when writing, `raw=False`
//! and `strict_map_key=True` when reading) plus oslo's ext types. This module
//! holds the msgpack layer shared by [`datetime`] and [`posting`]: a writer
//! that produces the bytes msgpack-python produces for the same Python value,
//! and a reader that refuses what `msgpackutils.loads` refuses.

pub mod datetime;
mod ext;
pub mod posting;

pub use datetime::OsloDateTime;
pub use posting::{
    decode_posting, encode_int, encode_posting, posting_parts, value_to_json, Book, CreatedOn, Posting,
    PostingParts,
};

use rmpv::Value;

/// How deeply containers and ext payloads may nest when reading. Python
/// gives up at 1024 container levels (msgpack-python's C unpacker); we stop
/// at 512 so that a hostile posting cannot exhaust a 2 MiB thread stack,
/// even in a debug build. No real posting comes near either limit.
const MAX_DEPTH: usize = 512;

/// The nesting an oslo ext payload costs: Python decodes it through about
/// three more frames of its 1000-frame recursion limit, so it gives up
/// after some 330 nested ext payloads (we do after 170).
const EXT_DEPTH_COST: usize = 3;

// ---------------------------------------------------------------------------
// Writing, as msgpack-python packs Python values.

/// Writes an int in its smallest form, as msgpack-python packs a Python int.
fn write_int(out: &mut Vec<u8>, n: i64) {
    match n {
        0.. => write_uint(out, n.unsigned_abs()),
        -32..=-1 => out.push(n as u8),
        -128..=-33 => out.extend([0xd0, n as u8]),
        -32_768..=-129 => push_be(out, 0xd1, &(n as i16).to_be_bytes()),
        -2_147_483_648..=-32_769 => push_be(out, 0xd2, &(n as i32).to_be_bytes()),
        _ => push_be(out, 0xd3, &n.to_be_bytes()),
    }
}

/// Writes a non-negative int in its smallest form.
fn write_uint(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=0x7f => out.push(n as u8),
        0x80..=0xff => out.extend([0xcc, n as u8]),
        0x100..=0xffff => push_be(out, 0xcd, &(n as u16).to_be_bytes()),
        0x1_0000..=0xffff_ffff => push_be(out, 0xce, &(n as u32).to_be_bytes()),
        _ => push_be(out, 0xcf, &n.to_be_bytes()),
    }
}

fn push_be(out: &mut Vec<u8>, marker: u8, bytes: &[u8]) {
    out.push(marker);
    out.extend_from_slice(bytes);
}

/// Writes a length header in its smallest form: `fix.0 | len` when `len`
/// is below `fix.1`, else the 8-bit form (for families that have one), the
/// 16-bit form or the 32-bit form, whose markers are `wide`.
fn write_len(out: &mut Vec<u8>, len: usize, fix: Option<(u8, usize)>, wide: (Option<u8>, u8, u8)) {
    let (m8, m16, m32) = wide;
    match (fix, m8) {
        (Some((base, limit)), _) if len < limit => out.push(base | len as u8),
        (_, Some(m8)) if len <= 0xff => out.extend([m8, len as u8]),
        _ if len <= 0xffff => push_be(out, m16, &(len as u16).to_be_bytes()),
        _ => push_be(out, m32, &(len as u32).to_be_bytes()),
    }
}

/// Writes a msgpack str (fixstr, str8, str16 or str32).
fn write_str(out: &mut Vec<u8>, s: &str) {
    write_len(out, s.len(), Some((0xa0, 32)), (Some(0xd9), 0xda, 0xdb));
    out.extend_from_slice(s.as_bytes());
}

/// Writes a msgpack bin (Python `bytes`).
fn write_bin(out: &mut Vec<u8>, b: &[u8]) {
    write_len(out, b.len(), None, (Some(0xc4), 0xc5, 0xc6));
    out.extend_from_slice(b);
}

/// Writes a map header for `len` entries.
fn write_map_len(out: &mut Vec<u8>, len: usize) {
    write_len(out, len, Some((0x80, 16)), (None, 0xde, 0xdf));
}

/// Writes an ext value: fixext for 1, 2, 4, 8 and 16 bytes, else ext8/16/32.
fn write_ext(out: &mut Vec<u8>, code: i8, data: &[u8]) {
    match data.len() {
        1 => out.push(0xd4),
        2 => out.push(0xd5),
        4 => out.push(0xd6),
        8 => out.push(0xd7),
        16 => out.push(0xd8),
        n => write_len(out, n, None, (Some(0xc7), 0xc8, 0xc9)),
    }
    out.push(code as u8);
    out.extend_from_slice(data);
}

/// Writes any value the way msgpack-python writes the Python value it
/// decodes to: floats are always float64 (`cb`, a decoded float32 included),
/// ints take their smallest form, and a str holding invalid UTF-8 (which
/// Python could not have) is written as bin.
fn write_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Nil => out.push(0xc0),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        // An rmpv integer is always an i64 or a u64.
        Value::Integer(i) => match (i.as_i64(), i.as_u64()) {
            (Some(n), _) => write_int(out, n),
            (_, n) => write_uint(out, n.unwrap_or_default()),
        },
        Value::F32(f) => push_be(out, 0xcb, &f64::from(*f).to_be_bytes()),
        Value::F64(f) => push_be(out, 0xcb, &f.to_be_bytes()),
        Value::String(s) => match s.as_str() {
            Some(text) => write_str(out, text),
            None => write_bin(out, s.as_bytes()),
        },
        Value::Binary(b) => write_bin(out, b),
        Value::Array(items) => {
            write_len(out, items.len(), Some((0x90, 16)), (None, 0xdc, 0xdd));
            items.iter().for_each(|item| write_value(out, item));
        }
        Value::Map(entries) => {
            write_map_len(out, entries.len());
            for (key, value) in entries {
                write_value(out, key);
                write_value(out, value);
            }
        }
        Value::Ext(code, data) => write_ext(out, *code, data),
    }
}

// ---------------------------------------------------------------------------
// Reading, as oslo `msgpackutils.loads` reads.

/// Decodes one whole msgpack value the way `msgpackutils.loads` does, or
/// says why Python would fail: bad or truncated msgpack, the reserved byte
/// `c1`, trailing bytes, a str that is not UTF-8, a map key that is neither
/// str nor bin, an ext code below 0 other than the timestamp (-1), a bad
/// timestamp, or an oslo ext (0 to 7) whose handler would raise (see [`ext`]).
/// `depth` is how many more levels of nesting are allowed.
fn oslo_loads(bytes: &[u8], depth: usize) -> Result<Value, String> {
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
fn map_get<'v>(entries: &'v [(Value, Value)], key: &str) -> Option<&'v Value> {
    entries
        .iter()
        .rev()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

/// Python truthiness of the decoded value.
fn truthy(v: &Value) -> bool {
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

/// Access to the taskflow fixtures in `shared/fixtures/taskflow`.
#[cfg(test)]
mod fixtures {
    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/fixtures/taskflow/");

    /// Parses a fixture file, failing loudly when it is missing.
    pub(super) fn load(name: &str) -> serde_json::Value {
        let path = format!("{DIR}{name}");
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("taskflow fixture {path} is missing or unreadable: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("taskflow fixture {path} is not JSON: {e}"))
    }

    /// `redis_golden.json`.
    pub(super) fn golden() -> serde_json::Value {
        load("redis_golden.json")
    }

    /// Bytes from the fixtures' lowercase hex.
    pub(super) fn unhex(hex: &str) -> Vec<u8> {
        let pairs = hex.as_bytes().chunks_exact(2);
        assert!(pairs.remainder().is_empty(), "odd-length hex {hex:?}");
        pairs
            .map(|pair| {
                std::str::from_utf8(pair)
                    .ok()
                    .and_then(|pair| u8::from_str_radix(pair, 16).ok())
                    .unwrap_or_else(|| panic!("bad hex {hex:?}"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loads(bytes: &[u8]) -> Result<Value, String> {
        oslo_loads(bytes, MAX_DEPTH)
    }

    fn packed(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        write_value(&mut out, v);
        out
    }

    #[test]
    fn headers_take_msgpack_python_forms() {
        let s = |n: usize| packed(&Value::from("x".repeat(n)))[..3].to_vec();
        assert_eq!(s(31)[0], 0xbf);
        assert_eq!(s(32)[..2], [0xd9, 32]);
        assert_eq!(s(256), [0xda, 1, 0]);
        assert_eq!(packed(&Value::Binary(vec![7]))[..2], [0xc4, 1]);
        let arr = |n: usize| packed(&Value::Array(vec![Value::Nil; n]))[..3].to_vec();
        assert_eq!(arr(15)[0], 0x9f);
        assert_eq!(arr(16), [0xdc, 0, 16]);
        let map = |n: usize| packed(&Value::Map(vec![(Value::from("k"), Value::Nil); n]))[..3].to_vec();
        assert_eq!(map(15)[0], 0x8f);
        assert_eq!(map(16), [0xde, 0, 16]);
        let ext = |n: usize| packed(&Value::Ext(9, vec![0; n]))[..3].to_vec();
        assert_eq!(ext(1)[..2], [0xd4, 9]);
        assert_eq!(ext(16)[..2], [0xd8, 9]);
        assert_eq!(ext(3), [0xc7, 3, 9]);
        assert_eq!(ext(300), [0xc8, 1, 44]);
        assert_eq!(packed(&Value::F32(1.5)), packed(&Value::F64(1.5)));
        assert_eq!(packed(&Value::F64(1.5))[0], 0xcb);
        assert_eq!(packed(&Value::from(u64::MAX))[0], 0xcf);
    }

    #[test]
    fn reader_round_trips_every_marker() {
        let value = Value::Array(vec![
            Value::Nil,
            Value::Boolean(true),
            Value::from(-5),
            Value::from(-100),
            Value::from(-1000),
            Value::from(-100_000),
            Value::from(i64::MIN),
            Value::from(200),
            Value::from(70_000),
            Value::from(u64::MAX),
            Value::F64(-0.25),
            Value::from("é漢"),
            Value::Binary(vec![1, 2, 3]),
            Value::Map(vec![(Value::Binary(b"k".to_vec()), Value::Ext(42, vec![1, 2]))]),
            Value::Ext(-1, vec![0; 4]),
        ]);
        let bytes = packed(&value);
        assert_eq!(loads(&bytes), Ok(value));
        // float32 and non-minimal ints are read too
        assert_eq!(loads(&[0xca, 0x3f, 0xc0, 0, 0]), Ok(Value::F32(1.5)));
        assert_eq!(loads(&[0xd1, 0, 5]), Ok(Value::from(5)));
    }

    #[test]
    fn reader_refuses_what_python_refuses() {
        let bad: &[(&str, &[u8])] = &[
            ("empty", b""),
            ("reserved c1 nested", &[0x91, 0xc1]),
            ("truncated str", &[0xa3, b'a']),
            ("trailing", &[0x01, 0x02]),
            ("invalid utf-8", &[0xa1, 0xff]),
            ("int map key", &[0x81, 0x01, 0x02]),
            ("nil map key", &[0x81, 0xc0, 0x02]),
            ("negative ext code", &[0xd4, 0xfe, 0x00]),
            ("timestamp of 3 bytes", &[0xc7, 3, 0xff, 0, 0, 0]),
            (
                "timestamp96 nanos",
                &[0xc7, 12, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0],
            ),
            ("uuid ext not hex", &[0xd4, 0x00, b'x']),
            ("set ext not msgpack", &[0xd4, 0x04, 0xc1]),
            ("huge array header", &[0xdd, 0xff, 0xff, 0xff, 0xff]),
        ];
        for (what, bytes) in bad {
            assert!(loads(bytes).is_err(), "{what} should be refused");
        }
        let uuid = b"0b5a1d2e3c4f4a6b8c7d9e0f1a2b3c01";
        let mut ok = vec![0xc7, 32, 0x00];
        ok.extend_from_slice(uuid);
        assert!(loads(&ok).is_ok());
        assert!(loads(&[0xd4, 0x04, 0x90]).is_ok(), "set ext of an empty array");
        assert!(loads(&[0xd4, 0x21, 0x00]).is_ok(), "application ext code 33");
    }

    #[test]
    fn nesting_is_limited_without_overflowing_the_stack() {
        let arrays = |levels: usize| {
            let mut bytes = vec![0x91; levels - 1];
            bytes.push(0x90);
            bytes
        };
        assert!(loads(&arrays(MAX_DEPTH)).is_ok());
        assert!(loads(&arrays(MAX_DEPTH + 1)).is_err());
        // Sets (ext 4) whose payload is a set, and so on.
        let sets = |levels: usize| {
            (0..levels).fold(vec![0x90], |inner, _| {
                let mut out = Vec::new();
                write_ext(&mut out, 4, &inner);
                out
            })
        };
        let most = (MAX_DEPTH - 1) / EXT_DEPTH_COST;
        assert!(loads(&sets(most)).is_ok());
        assert!(loads(&sets(most + 1)).is_err());
        // Datetimes whose payload holds another datetime under an extra key.
        let datetimes = |levels: usize| {
            (0..levels).fold(vec![0x90], |inner, _| {
                let mut payload = vec![0x88];
                for key in ["day", "month", "year", "hour", "minute", "second", "microsecond"] {
                    write_str(&mut payload, key);
                    payload.push(1);
                }
                write_str(&mut payload, "next");
                payload.extend(inner);
                let mut out = Vec::new();
                write_ext(&mut out, 1, &payload);
                out
            })
        };
        // The payload map is one more level.
        let most = (MAX_DEPTH - 1) / (EXT_DEPTH_COST + 1);
        assert!(loads(&datetimes(most)).is_ok());
        assert!(loads(&datetimes(most + 1)).is_err());
    }
}

/// The `details` a jobworker posting carries (both backends): `{"args":
/// args}`, or `{}` for a job without arguments.
pub(crate) fn details_of(args: &rmpv::Value) -> rmpv::Value {
    if args.is_nil() {
        rmpv::Value::Map(Vec::new())
    } else {
        rmpv::Value::Map(vec![(rmpv::Value::from("args"), args.clone())])
    }
}

/// A job's arguments: `details["args"]` when present (jobworker's
/// postings), the whole `details` otherwise (taskflow's), nil when empty.
pub(crate) fn args_of(details: &rmpv::Value) -> rmpv::Value {
    match details {
        rmpv::Value::Map(entries) if entries.is_empty() => rmpv::Value::Nil,
        rmpv::Value::Map(entries) => entries
            .iter()
            .find(|(k, _)| k.as_str() == Some("args"))
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| details.clone()),
        other => other.clone(),
    }
}
