//! JSON as Python's `json` module writes and reads it, on msgpack values.
//!
//! Taskflow's ZooKeeper board stores postings with `jsonutils.dumps`
//! (Python's `json.dumps` with its defaults): `", "` and `": "` separators,
//! `ensure_ascii=True` (every character outside `' '..='~'` escaped as
//! lowercase `\uXXXX`, surrogate pairs above the BMP), floats as Python's
//! `repr`, `NaN`/`Infinity` allowed. [`dumps`] writes exactly those bytes
//! for an [`rmpv::Value`]; [`loads`] reads what `json.loads` reads
//! (including `NaN` and `Infinity`, duplicate keys keeping the last value)
//! and refuses what it refuses.

mod dump;
mod load;

use rmpv::Value;

/// How deeply arrays and objects may nest when reading or writing (Python
/// gives up near its recursion limit of 1000).
const MAX_DEPTH: usize = 1000;

/// The most digits an integer may have: Python (3.11 and later, which
/// taskflow 6.5 needs) refuses to convert longer ones
/// (`sys.get_int_max_str_digits()`), so `json.loads` fails on them.
const MAX_INT_DIGITS: usize = 4300;

pub(crate) use dump::dumps;
pub(crate) use load::loads;

/// The last value stored under the string key `key` of a map.
pub(crate) fn get<'v>(map: &'v Value, key: &str) -> Option<&'v Value> {
    match map {
        Value::Map(entries) => entries
            .iter()
            .rev()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v),
        _ => None,
    }
}

/// A `serde_json` value as a msgpack value (for worker metadata).
pub(crate) fn from_serde(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Nil,
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::from(i),
            (None, Some(u)) => Value::from(u),
            _ => Value::F64(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::String(s) => Value::from(s.as_str()),
        serde_json::Value::Array(items) => Value::Array(items.iter().map(from_serde).collect()),
        serde_json::Value::Object(map) => Value::Map(
            map.iter()
                .map(|(k, v)| (Value::from(k.as_str()), from_serde(v)))
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::dump::float_repr;
    use super::*;

    fn map(entries: Vec<(&str, Value)>) -> Value {
        Value::Map(entries.into_iter().map(|(k, v)| (Value::from(k), v)).collect())
    }

    #[test]
    fn floats_are_written_as_python_repr() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.5, "1.5"),
            (1.0, "1.0"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (-2.5, "-2.5"),
            (1234.5678, "1234.5678"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(*f), *want, "{f:e}");
        }
        // A float32 is written as the float64 Python would hold.
        assert_eq!(dumps(&Value::F32(1.1)).unwrap(), "1.100000023841858");
    }

    #[test]
    fn strings_are_escaped_as_ensure_ascii() {
        let text = "a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{7f} é漢😀/";
        assert_eq!(
            dumps(&Value::from(text)).unwrap(),
            r#""a\"b\\c\n\r\t\b\f\u0001\u007f \u00e9\u6f22\ud83d\ude00/""#
        );
        assert_eq!(
            loads(dumps(&Value::from(text)).unwrap().as_bytes()).unwrap(),
            Value::from(text)
        );
    }

    #[test]
    fn containers_use_python_separators_and_key_conversion() {
        let v = map(vec![
            (
                "a",
                Value::Array(vec![Value::from(1), Value::Nil, Value::Boolean(true)]),
            ),
            ("b", Value::Map(vec![])),
            ("c", Value::Array(vec![])),
        ]);
        assert_eq!(dumps(&v).unwrap(), r#"{"a": [1, null, true], "b": {}, "c": []}"#);
        let keys = Value::Map(vec![
            (Value::from(1), Value::from(2)),
            (Value::Boolean(false), Value::Nil),
            (Value::Nil, Value::from(-3)),
            (Value::F64(2.5), Value::from(u64::MAX)),
        ]);
        assert_eq!(
            dumps(&keys).unwrap(),
            r#"{"1": 2, "false": null, "null": -3, "2.5": 18446744073709551615}"#
        );
    }

    #[test]
    fn values_without_a_json_form_are_refused() {
        assert!(dumps(&Value::Binary(vec![1])).is_err());
        assert!(dumps(&Value::Ext(3, vec![1])).is_err());
        assert!(dumps(&Value::Map(vec![(Value::Binary(vec![1]), Value::Nil)])).is_err());
        assert!(dumps(&Value::Map(vec![(Value::Array(vec![]), Value::Nil)])).is_err());
        let mut deep = Value::Nil;
        for _ in 0..MAX_DEPTH + 1 {
            deep = Value::Array(vec![deep]);
        }
        assert!(dumps(&deep).is_err());
    }

    #[test]
    fn reader_accepts_what_python_accepts() {
        let v = loads(
            br#" {"a": [1, -2, 3.5, 1e3, 2E-2, -0, 18446744073709551615, 99999999999999999999],
            "b": NaN, "c": -Infinity, "d": Infinity, "e": "\u00e9\ud83d\ude00\ud800x\/", "a": null} "#,
        )
        .unwrap();
        let Value::Map(entries) = &v else { panic!("{v:?}") };
        assert_eq!(entries.len(), 5, "a duplicate key keeps one entry");
        assert_eq!(entries[0].0.as_str(), Some("a"), "in the first key's place");
        assert_eq!(entries[0].1, Value::Nil, "with the last value");
        assert!(get(&v, "b").unwrap().as_f64().unwrap().is_nan());
        assert_eq!(get(&v, "c").unwrap().as_f64(), Some(f64::NEG_INFINITY));
        assert_eq!(get(&v, "e").unwrap().as_str(), Some("é😀\u{fffd}x/"));
        let nums = loads(b"[1, -2, 3.5, 1e3, 2E-2, -0, 18446744073709551615, 99999999999999999999]").unwrap();
        assert_eq!(
            nums,
            Value::Array(vec![
                Value::from(1),
                Value::from(-2),
                Value::F64(3.5),
                Value::F64(1000.0),
                Value::F64(0.02),
                Value::from(0),
                Value::from(u64::MAX),
                Value::F64(1e20),
            ])
        );
    }

    #[test]
    fn reader_refuses_what_python_refuses() {
        let bad: &[&[u8]] = &[
            b"",
            b"{",
            b"{\"a\" 1}",
            b"{'a': 1}",
            b"[1,]",
            b"{\"a\": 1,}",
            b"01",
            b"1 2",
            b"\"a\nb\"",
            b"\"\\x\"",
            b"\"\\u12\"",
            b"nul",
            b"\xef\xbb\xbf{}",
            b"\xff",
            b"+1",
            b".5",
        ];
        for bytes in bad {
            assert!(
                loads(bytes).is_err(),
                "{:?} should be refused",
                String::from_utf8_lossy(bytes)
            );
        }
        let digits = |n: usize| format!("[-{}]", "9".repeat(n));
        assert!(loads(digits(MAX_INT_DIGITS).as_bytes()).is_ok());
        assert!(
            loads(digits(MAX_INT_DIGITS + 1).as_bytes()).is_err(),
            "python's int digit limit"
        );
        assert!(
            loads(format!("{}.5", "9".repeat(MAX_INT_DIGITS + 1)).as_bytes()).is_ok(),
            "floats have none"
        );
        let mut deep = "[".repeat(MAX_DEPTH + 1);
        deep.push_str(&"]".repeat(MAX_DEPTH + 1));
        assert!(loads(deep.as_bytes()).is_err());
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(loads(ok.as_bytes()).is_ok());
    }
}
