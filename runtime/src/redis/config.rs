//! The board-wide configuration stored in Redis (`<prefix>:config`) and
//! the keys it knows.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::redis::board::RedisBoard;

impl RedisBoard {
    /// The board-wide configuration stored in Redis (`<prefix>:config`).
    pub async fn config(&self) -> Result<HashMap<String, String>> {
        self.conn
            .query(redis::cmd("HGETALL").arg(self.config_key()))
            .await
    }

    /// Sets (or with `None` removes) a configuration value. Known keys:
    /// see [`CONFIG_KEYS`]; values are checked before they are stored.
    pub async fn set_config(&self, key: &str, value: Option<&str>) -> Result<()> {
        let Some((_, check)) = CONFIG_KEYS.iter().find(|(k, _)| *k == key) else {
            let known: Vec<&str> = CONFIG_KEYS.iter().map(|(k, _)| *k).collect();
            return Err(Error::invalid(format!(
                "unknown config key {key:?}; known keys: {}",
                known.join(", ")
            )));
        };
        match value {
            Some(v) => {
                check(v).map_err(|e| Error::invalid(format!("config {key}: {e}")))?;
                self.conn
                    .query::<()>(redis::cmd("HSET").arg(self.config_key()).arg(key).arg(v))
                    .await
            }
            None => {
                self.conn
                    .query::<()>(redis::cmd("HDEL").arg(self.config_key()).arg(key))
                    .await
            }
        }
    }

    fn config_key(&self) -> String {
        format!("{}:config", self.options().prefix)
    }
}

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

/// Configuration keys stored in Redis, read by workers and clients when
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
