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
mod read;
mod write;

pub use datetime::OsloDateTime;
pub use posting::{
    decode_posting, encode_int, encode_posting, posting_parts, value_to_json, Book, CreatedOn, Posting,
    PostingParts,
};

use read::{map_get, oslo_loads, truthy};
use write::{write_ext, write_int, write_map_len, write_str, write_value};

/// How deeply containers and ext payloads may nest when reading. Python
/// gives up at 1024 container levels (msgpack-python's C unpacker); we stop
/// at 512 so that a hostile posting cannot exhaust a 2 MiB thread stack,
/// even in a debug build. No real posting comes near either limit.
const MAX_DEPTH: usize = 512;

/// The nesting an oslo ext payload costs: Python decodes it through about
/// three more frames of its 1000-frame recursion limit, so it gives up
/// after some 330 nested ext payloads (we do after 170).
const EXT_DEPTH_COST: usize = 3;

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
    use rmpv::Value;

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
