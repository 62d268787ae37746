//! What Python does on meeting a msgpack ext inside a taskflow posting:
//! msgpack-python checks a timestamp (-1) and refuses other negative codes;
//! oslo's handlers turn codes 0 to 7 into Python objects and fail on a
//! payload they cannot turn (then taskflow deletes the posting). Codes 8 to
//! 127 are opaque `ExtType`s and never fail.

use rmpv::Value;

use super::{datetime, oslo_loads, EXT_DEPTH_COST};

/// Checks one ext of code `code` with payload `data`, `depth` being how
/// many more levels of nesting are allowed.
pub(super) fn check_ext(code: i8, data: &[u8], depth: usize) -> Result<(), String> {
    // Python decodes a nested payload through about three more frames of
    // its 1000-frame recursion limit; charge as much.
    let depth = depth.saturating_sub(EXT_DEPTH_COST - 1);
    match code {
        -1 => check_timestamp(data),
        ..=-2 => Err(format!("ext type {code} is not allowed (only 0..127 and -1)")),
        0 => check_uuid(data),
        1 | 6 => datetime::check_datetime_payload(data, depth)
            .map_err(|e| format!("bad datetime (ext {code}): {e}")),
        2 => check_count(data, depth).map_err(|e| format!("bad itertools.count (ext 2): {e}")),
        3 => check_ip_address(data, depth).map_err(|e| format!("bad ip address (ext 3): {e}")),
        4 | 5 => check_set(data, depth).map_err(|e| format!("bad set (ext {code}): {e}")),
        7 => datetime::check_date_payload(data, depth).map_err(|e| format!("bad date (ext 7): {e}")),
        _ => Ok(()),
    }
}

/// msgpack-python's timestamp (ext -1): 4, 8 or 12 bytes, nanoseconds below
/// one billion.
fn check_timestamp(data: &[u8]) -> Result<(), String> {
    let be = |b: &[u8]| b.iter().fold(0u64, |acc, x| acc << 8 | u64::from(*x));
    let nanos = match data.len() {
        4 => 0,
        8 => be(data) >> 34,
        12 => be(&data[..4]),
        n => return Err(format!("bad timestamp (ext -1): {n} bytes")),
    };
    if nanos >= 1_000_000_000 {
        return Err("bad timestamp (ext -1): nanoseconds out of range".into());
    }
    Ok(())
}

/// Oslo's UUID ext (0): `uuid.UUID(hex=<ascii payload>)`, i.e. 32 hex digits
/// once braces, hyphens and a `urn:uuid:` prefix are removed.
fn check_uuid(data: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(data).unwrap_or("");
    let hex = text.replace("urn:", "").replace("uuid:", "");
    let hex = hex.trim_matches(|c| c == '{' || c == '}').replace('-', "");
    if !data.is_ascii() || hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("bad uuid (ext 0): not 32 hex digits".into());
    }
    Ok(())
}

/// Oslo's `itertools.count` (ext 2): `start, step = msgpack.unpackb(data)`
/// then `itertools.count(start, step)`, so the payload must unpack to two
/// numbers: an array of two ints, floats or booleans, or a bin of two bytes
/// (Python iterates bytes as ints). Python unpacks this payload without
/// oslo's handlers, so an ext inside it is an opaque `ExtType`; reading it
/// with them refuses the same payloads, as no ext is a number.
fn check_count(data: &[u8], depth: usize) -> Result<(), String> {
    let number = |v: &Value| {
        matches!(
            v,
            Value::Integer(_) | Value::F32(_) | Value::F64(_) | Value::Boolean(_)
        )
    };
    match oslo_loads(data, depth)? {
        Value::Array(items) if items.len() == 2 && items.iter().all(number) => Ok(()),
        Value::Binary(bytes) if bytes.len() == 2 => Ok(()),
        _ => Err("not a start and a step".into()),
    }
}

/// Oslo's `netaddr.IPAddress` (ext 3): `IPAddress(msgpack.unpackb(data))`,
/// which takes a non-negative int (booleans included) or a str (as with
/// [`check_count`], no ext is either). netaddr's address syntax is not
/// re-implemented: any str is read, so jobworker never refuses an address
/// taskflow reads.
fn check_ip_address(data: &[u8], depth: usize) -> Result<(), String> {
    match oslo_loads(data, depth)? {
        Value::Integer(n) if n.as_i64().is_none_or(|n| n >= 0) => Ok(()),
        Value::Boolean(_) | Value::String(_) => Ok(()),
        _ => Err("not an address".into()),
    }
}

/// Oslo's `set` (ext 4) and `frozenset` (ext 5): `set(loads(data))`, so the
/// payload must load to something Python can iterate (a list, str, bytes,
/// dict, set, frozenset or opaque `ExtType`; an endless `itertools.count`
/// never finishes) whose items are hashable (a list's items must not be
/// lists, dicts, sets or xmlrpc DateTimes).
fn check_set(data: &[u8], depth: usize) -> Result<(), String> {
    let items = match oslo_loads(data, depth)? {
        Value::Array(items) => items,
        Value::Map(_) | Value::String(_) | Value::Binary(_) => return Ok(()),
        Value::Ext(4 | 5 | 8.., _) => return Ok(()),
        Value::Ext(2, _) => return Err("an itertools.count never ends".into()),
        _ => return Err("the payload is not iterable".into()),
    };
    let hashable = |v: &Value| !matches!(v, Value::Array(_) | Value::Map(_) | Value::Ext(4 | 6, _));
    match items.iter().all(hashable) {
        true => Ok(()),
        false => Err("an item is unhashable".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::unhex;
    use super::super::{oslo_loads, MAX_DEPTH};

    /// (what, a whole ext value, whether oslo `msgpackutils.loads` takes
    /// it), each checked against oslo.serialization 5.11.0 and netaddr 1.3.
    const CASES: &[(&str, &str, bool)] = &[
        ("set of ints", "c70304920102", true),
        ("set of a str", "c70304a26162", true),
        ("set of a map", "d60481a16b01", true),
        ("set of an opaque ext", "c70304d40978", true),
        ("frozenset of a set", "c70305d40490", true),
        ("set of frozensets", "d60491d40590", true),
        ("set of an int", "d40401", false),
        ("set of nil", "d404c0", false),
        (
            "set of a uuid",
            "c72304c720003062356131643265336334663461366238633764396530663161326233633031",
            false,
        ),
        ("set of lists", "c70304919101", false),
        ("frozenset of maps", "d5059180", false),
        ("set of sets", "d60491d40490", false),
        (
            "set of xmlrpc datetimes",
            "c73c0491c7380687a364617901a56d6f6e746801a479656172cd07d0a4686f757200a66d696e75746500a67365636f6e6400ab6d6963726f7365636f6e6400",
            false,
        ),
        // Python never finishes building a set of an endless count.
        ("set of a count", "c70604c70302920102", false),
        ("count", "c70b029201cb4004000000000000", true),
        ("count of booleans", "c7030292c3c2", true),
        ("count of two bytes", "d602c4020102", true),
        ("count of one", "d5029101", false),
        ("count of a str", "c70302a26162", false),
        ("count of nil", "c7030292c001", false),
        ("count with an ext", "c705029201d40078", false),
        ("ip address int", "c70903cfffffffffffffffff", true),
        ("ip address str", "d703a7312e322e332e34", true),
        ("ip address bool", "d403c3", true),
        ("ip address negative", "d403ff", false),
        ("ip address float", "c70903cb3ff0000000000000", false),
        ("ip address nil", "d403c0", false),
        ("ip address list", "d40390", false),
        ("ip address bin", "c70303c40101", false),
        ("ip address with trailing bytes", "d5030100", false),
    ];

    #[test]
    fn oslo_handlers_refuse_what_python_cannot_build() {
        for (what, hex, python_takes_it) in CASES {
            let ours = oslo_loads(&unhex(hex), MAX_DEPTH);
            assert_eq!(ours.is_ok(), *python_takes_it, "{what}: {ours:?}");
        }
    }
}
