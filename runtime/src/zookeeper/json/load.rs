//! Reading: JSON text as Python's `json.loads` reads it, and refused where
//! it refuses it.

use rmpv::Value;

use super::{MAX_DEPTH, MAX_INT_DIGITS};

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
