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

use rmpv::Value;

/// How deeply arrays and objects may nest when reading or writing (Python
/// gives up near its recursion limit of 1000).
const MAX_DEPTH: usize = 1000;

/// The most digits an integer may have: Python (3.11 and later, which
/// taskflow 6.5 needs) refuses to convert longer ones
/// (`sys.get_int_max_str_digits()`), so `json.loads` fails on them.
const MAX_INT_DIGITS: usize = 4300;

/// Writes `value` as Python's `json.dumps` would write the Python value it
/// stands for. Fails on what has no JSON form: binary, ext values, strings
/// that are not UTF-8, and map keys that are neither strings, numbers,
/// booleans nor nil.
pub(crate) fn dumps(value: &Value) -> Result<String, String> {
    let mut out = String::new();
    write_value(&mut out, value, MAX_DEPTH)?;
    Ok(out)
}

fn write_value(out: &mut String, value: &Value, depth: usize) -> Result<(), String> {
    let depth = depth.checked_sub(1).ok_or("nested too deeply for json")?;
    match value {
        Value::Nil => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Integer(i) => match (i.as_i64(), i.as_u64()) {
            (Some(n), _) => out.push_str(&n.to_string()),
            (None, Some(n)) => out.push_str(&n.to_string()),
            (None, None) => return Err("integer out of range".into()),
        },
        Value::F32(f) => out.push_str(&float_repr(f64::from(*f))),
        Value::F64(f) => out.push_str(&float_repr(*f)),
        Value::String(s) => match s.as_str() {
            Some(text) => quote(out, text),
            None => return Err("a string that is not utf-8 has no json form".into()),
        },
        Value::Binary(_) => return Err("binary values have no json form".into()),
        Value::Ext(code, _) => return Err(format!("msgpack ext type {code} has no json form")),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item, depth)?;
            }
            out.push(']');
        }
        Value::Map(entries) => {
            out.push('{');
            for (i, (key, item)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_key(out, key)?;
                out.push_str(": ");
                write_value(out, item, depth)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// Python turns int, float, bool and None keys into strings; anything else
/// is a `TypeError`.
fn write_key(out: &mut String, key: &Value) -> Result<(), String> {
    match key {
        Value::String(_) => write_value(out, key, 1),
        Value::Integer(_) | Value::F32(_) | Value::F64(_) | Value::Boolean(_) | Value::Nil => {
            let mut text = String::new();
            write_value(&mut text, key, 1)?;
            quote(out, &text);
            Ok(())
        }
        _ => Err("map keys must be strings, numbers, booleans or nil to be json".into()),
    }
}

/// Python's `json.dumps` of a str with `ensure_ascii=True`.
fn quote(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// Python's `repr(float)`: the shortest digits that round-trip, positional
/// for decimal exponents from -4 to 15, scientific (`1e+16`, `1.5e-05`)
/// otherwise; `NaN`, `Infinity` and `-Infinity` as `json.dumps` writes them.
pub(crate) fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // `{:e}` gives the shortest round-trip digits: "1.2345e17", "0e0".
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let decpt = exp + 1;
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let n = digits.len() as i32;
    if (-3..=16).contains(&decpt) {
        let body = if decpt <= 0 {
            format!("0.{}{digits}", "0".repeat((-decpt) as usize))
        } else if decpt < n {
            format!("{}.{}", &digits[..decpt as usize], &digits[decpt as usize..])
        } else {
            format!("{digits}{}.0", "0".repeat((decpt - n) as usize))
        };
        format!("{sign}{body}")
    } else {
        let mantissa = if n > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits.clone()
        };
        let e = decpt - 1;
        let esign = if e < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{esign}{:02}", e.abs())
    }
}

/// Reads one JSON document as Python's `json.loads` does (strict mode):
/// `NaN`, `Infinity` and `-Infinity` are accepted, control characters inside
/// strings are not, duplicate object keys keep the first key's place and the
/// last value, lone surrogates become U+FFFD, integers too large for 64
/// bits become floats, and integers of more than 4300 digits are refused.
pub(crate) fn loads(bytes: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not utf-8: {e}"))?;
    if text.starts_with('\u{feff}') {
        return Err("unexpected utf-8 bom".into());
    }
    let mut reader = Reader {
        text: text.as_bytes(),
        at: 0,
    };
    reader.skip_ws();
    let value = reader.value(MAX_DEPTH)?;
    reader.skip_ws();
    if reader.at != reader.text.len() {
        return Err(format!("extra data at byte {}", reader.at));
    }
    Ok(value)
}

struct Reader<'a> {
    text: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn err(&self, what: &str) -> String {
        format!("{what} at byte {}", self.at)
    }

    fn eat(&mut self, word: &str) -> bool {
        if self.text[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        let depth = depth
            .checked_sub(1)
            .ok_or_else(|| self.err("nested too deeply"))?;
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => Ok(Value::from(self.string()?)),
            Some(b'-' | b'0'..=b'9') => {
                if self.eat("-Infinity") {
                    return Ok(Value::F64(f64::NEG_INFINITY));
                }
                self.number()
            }
            _ if self.eat("null") => Ok(Value::Nil),
            _ if self.eat("true") => Ok(Value::Boolean(true)),
            _ if self.eat("false") => Ok(Value::Boolean(false)),
            _ if self.eat("NaN") => Ok(Value::F64(f64::NAN)),
            _ if self.eat("Infinity") => Ok(Value::F64(f64::INFINITY)),
            _ => Err(self.err("expecting value")),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, String> {
        self.at += 1;
        let mut entries: Vec<(Value, Value)> = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Value::Map(entries));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("expecting property name enclosed in double quotes"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.err("expecting ':' delimiter"));
            }
            self.at += 1;
            self.skip_ws();
            let value = self.value(depth)?;
            match entries.iter_mut().find(|(k, _)| k.as_str() == Some(key.as_str())) {
                Some(slot) => slot.1 = value,
                None => entries.push((Value::from(key), value)),
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Value::Map(entries));
                }
                _ => return Err(self.err("expecting ',' delimiter")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, String> {
        self.at += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.err("expecting ',' delimiter")),
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self
            .text
            .get(self.at..self.at + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| self.err("invalid \\uXXXX escape"))?;
        self.at += 4;
        u32::from_str_radix(digits, 16).map_err(|_| self.err("invalid \\uXXXX escape"))
    }

    fn string(&mut self) -> Result<String, String> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let start = self.at;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.at += 1;
            }
            // The input is valid UTF-8 and we stopped at an ASCII byte.
            out.push_str(std::str::from_utf8(&self.text[start..self.at]).unwrap_or_default());
            match self.peek() {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.at += 1;
                    let c = self.peek().ok_or_else(|| self.err("unterminated string"))?;
                    self.at += 1;
                    match c {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return Err(self.err("invalid \\escape")),
                    }
                }
                Some(_) => return Err(self.err("invalid control character in string")),
                None => return Err(self.err("unterminated string")),
            }
        }
    }

    /// The character of a `\uXXXX` escape (after `\u`), joining a
    /// surrogate pair; a lone surrogate becomes U+FFFD.
    fn unicode_escape(&mut self) -> Result<char, String> {
        let first = self.hex4()?;
        if (0xd800..0xdc00).contains(&first) && self.text[self.at..].starts_with(b"\\u") {
            let save = self.at;
            self.at += 2;
            let second = self.hex4()?;
            if (0xdc00..0xe000).contains(&second) {
                let c = 0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00);
                return Ok(char::from_u32(c).unwrap_or('\u{fffd}'));
            }
            self.at = save;
        }
        Ok(char::from_u32(first).unwrap_or('\u{fffd}'))
    }

    fn number(&mut self) -> Result<Value, String> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.err("expecting value")),
        }
        let mut float = false;
        if self.peek() == Some(b'.') && self.text.get(self.at + 1).is_some_and(u8::is_ascii_digit) {
            float = true;
            self.at += 1;
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            let save = self.at;
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                float = true;
                self.digits();
            } else {
                // Python's number pattern stops before a bare "e".
                self.at = save;
            }
        }
        let text = std::str::from_utf8(&self.text[start..self.at]).unwrap_or_default();
        if !float && text.trim_start_matches('-').len() > MAX_INT_DIGITS {
            return Err(format!(
                "integer at byte {start} exceeds the limit ({MAX_INT_DIGITS} digits) for integer string conversion"
            ));
        }
        if !float {
            if let Ok(n) = text.parse::<i64>() {
                return Ok(Value::from(n));
            }
            if let Ok(n) = text.parse::<u64>() {
                return Ok(Value::from(n));
            }
        }
        text.parse::<f64>()
            .map(Value::F64)
            .map_err(|_| self.err("bad number"))
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }
}

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
