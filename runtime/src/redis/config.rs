//! The board-wide configuration stored in Redis (`<prefix>:config`; the
//! keys and their rules: `board/config.rs`).

use std::collections::HashMap;

use crate::board::config::check_config;
#[cfg(doc)]
use crate::board::CONFIG_KEYS;
use crate::error::Result;
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
        check_config(key, value)?;
        match value {
            Some(v) => {
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
