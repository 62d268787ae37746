//! Writing: JSON text exactly as Python's `json.dumps` writes it.

use rmpv::Value;

use super::MAX_DEPTH;

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
