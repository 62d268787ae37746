//! Writing, as msgpack-python packs Python values: ints and lengths in
//! their smallest form, str and bin kept apart, ext values.

use rmpv::Value;

/// Writes an int in its smallest form, as msgpack-python packs a Python int.
pub(super) fn write_int(out: &mut Vec<u8>, n: i64) {
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
pub(super) fn write_str(out: &mut Vec<u8>, s: &str) {
    write_len(out, s.len(), Some((0xa0, 32)), (Some(0xd9), 0xda, 0xdb));
    out.extend_from_slice(s.as_bytes());
}

/// Writes a msgpack bin (Python `bytes`).
fn write_bin(out: &mut Vec<u8>, b: &[u8]) {
    write_len(out, b.len(), None, (Some(0xc4), 0xc5, 0xc6));
    out.extend_from_slice(b);
}

/// Writes a map header for `len` entries.
pub(super) fn write_map_len(out: &mut Vec<u8>, len: usize) {
    write_len(out, len, Some((0x80, 16)), (None, 0xde, 0xdf));
}

/// Writes an ext value: fixext for 1, 2, 4, 8 and 16 bytes, else ext8/16/32.
pub(super) fn write_ext(out: &mut Vec<u8>, code: i8, data: &[u8]) {
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
pub(super) fn write_value(out: &mut Vec<u8>, v: &Value) {
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
