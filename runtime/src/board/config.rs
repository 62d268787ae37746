//! The board-wide configuration's keys and their rules, the same on every
//! backend (Redis keeps the values in `<prefix>:config`, ZooKeeper in
//! `R/.jw/config`), and how stored retention values apply to a board's
//! options.

use std::time::Duration;

use crate::error::{Error, Result};

type Check = fn(&str) -> std::result::Result<(), String>;

fn seconds(v: &str) -> std::result::Result<(), String> {
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(()),
        _ => Err(format!("{v:?} is not a positive number of seconds")),
    }
}

fn count(v: &str) -> std::result::Result<(), String> {
    v.parse::<usize>()
        .map(drop)
        .map_err(|e| format!("{v:?} is not a count: {e}"))
}

/// Configuration keys stored on the board, read by workers and clients when
/// they start (a command-line flag, or an option changed from its default
/// in code, wins): `expiry` and `grace` (seconds: lease length, drain
/// time on TERM), `history-count` and `history-age` (completed jobs kept;
/// age in seconds), `trash-count` and `trash-age` (trashed jobs kept, the
/// dead letter; age in seconds).
pub const CONFIG_KEYS: &[(&str, Check)] = &[
    ("expiry", seconds),
    ("grace", seconds),
    ("history-count", count),
    ("history-age", seconds),
    ("trash-count", count),
    ("trash-age", seconds),
];

/// Checks that `key` is known and `value` (when set) follows its rule.
pub(crate) fn check_config(key: &str, value: Option<&str>) -> Result<()> {
    let Some((_, check)) = CONFIG_KEYS.iter().find(|(k, _)| *k == key) else {
        let known: Vec<&str> = CONFIG_KEYS.iter().map(|(k, _)| *k).collect();
        return Err(Error::invalid(format!(
            "unknown config key {key:?}; known keys: {}",
            known.join(", ")
        )));
    };
    match value {
        Some(v) => check(v).map_err(|e| Error::invalid(format!("config {key}: {e}"))),
        None => Ok(()),
    }
}

/// A count left at its default takes the stored configuration.
pub(crate) fn stored_count(option: &mut usize, default: usize, stored: Option<usize>) {
    if let (Some(n), true) = (stored, *option == default) {
        *option = n;
    }
}

/// An age left at its default takes the stored configuration (seconds).
pub(crate) fn stored_age(option: &mut Duration, default: Duration, stored: Option<f64>) {
    if let (Some(secs), true) = (stored, *option == default) {
        *option = Duration::try_from_secs_f64(secs).unwrap_or(default);
    }
}
