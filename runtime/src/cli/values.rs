//! Turning command-line values into the runtime's: seconds, spans like
//! `30s`, JSON arguments (stored as msgpack), and the default owner.

use std::time::Duration;

use crate::error::{Error, Result};

/// `value` seconds given with `flag`, which must not be negative.
pub(crate) fn seconds(value: f64, flag: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| Error::invalid(format!("{flag} must be a non-negative number of seconds")))
}

/// A duration with a unit: `250ms`, `30s`, `5m`, `2h`, `1d` (a bare number
/// is seconds).
pub(crate) fn parse_span(text: &str) -> Result<Duration> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => f64::NAN,
    };
    number
        .parse::<f64>()
        .ok()
        .and_then(|n| Duration::try_from_secs_f64(n * scale).ok())
        .ok_or_else(|| {
            Error::invalid(format!(
                "{text:?} is not a duration like 500ms, 30s, 5m, 2h or 1d"
            ))
        })
}

/// Converts command-line JSON into the msgpack value stored as arguments.
pub(crate) fn json_to_msgpack(v: &serde_json::Value) -> rmpv::Value {
    use serde_json::Value as J;
    match v {
        J::Null => rmpv::Value::Nil,
        J::Bool(b) => rmpv::Value::Boolean(*b),
        J::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => rmpv::Value::from(u),
            (None, Some(i)) => rmpv::Value::from(i),
            _ => rmpv::Value::F64(n.as_f64().unwrap_or(0.0)),
        },
        J::String(s) => rmpv::Value::from(s.as_str()),
        J::Array(items) => rmpv::Value::Array(items.iter().map(json_to_msgpack).collect()),
        J::Object(map) => rmpv::Value::Map(
            map.iter()
                .map(|(k, v)| (rmpv::Value::from(k.as_str()), json_to_msgpack(v)))
                .collect(),
        ),
    }
}

/// `<host>:<pid>`, the owner string used when none is given.
pub(crate) fn default_owner() -> String {
    format!("{}:{}", crate::worker::hostname(), std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_seconds() {
        assert_eq!(parse_span("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_span("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_span("2h").unwrap(), Duration::from_secs(7200));
        assert!(parse_span("5 weeks").is_err());
        assert_eq!(seconds(1.5, "--x").unwrap(), Duration::from_millis(1500));
        assert!(seconds(-1.0, "--x").is_err());
    }
}
