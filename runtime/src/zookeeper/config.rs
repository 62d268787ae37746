//! The board-wide configuration on ZooKeeper: `R/.jw/config`, a JSON
//! object of strings (the keys and their rules: `board/config.rs`, as on
//! Redis), rewritten whole at the version read. A board takes the stored
//! retention values when it connects.

use std::collections::HashMap;

use zookeeper_client as zk;

use crate::board::config::{check_config, stored_age, stored_count};
use crate::error::{Error, Result};
use crate::zookeeper::lease::TRIES;
use crate::zookeeper::options::{DEFAULT_HISTORY_AGE, DEFAULT_HISTORY_COUNT};
use crate::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};

/// The stored configuration in `data`; unreadable (written by hand, say),
/// it counts as empty, with a warning, so that it blocks neither a board
/// nor the `set` that writes it anew.
fn parse(data: &[u8]) -> HashMap<String, String> {
    serde_json::from_slice(data).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "the stored configuration is not readable; taking none");
        HashMap::new()
    })
}

/// Options left at their defaults take the stored retention values.
pub(crate) fn apply_stored(opts: &mut ZooKeeperOptions, stored: &HashMap<String, String>) {
    let count = |k: &str| stored.get(k).and_then(|v| v.parse().ok());
    let age = |k: &str| stored.get(k).and_then(|v| v.parse().ok());
    stored_count(
        &mut opts.history_count,
        DEFAULT_HISTORY_COUNT,
        count("history-count"),
    );
    stored_age(&mut opts.history_age, DEFAULT_HISTORY_AGE, age("history-age"));
    stored_count(
        &mut opts.trash_count,
        crate::redis::DEFAULT_TRASH_COUNT,
        count("trash-count"),
    );
    stored_age(
        &mut opts.trash_age,
        crate::redis::DEFAULT_TRASH_AGE,
        age("trash-age"),
    );
}

impl ZooKeeperBoard {
    fn config_path(&self) -> String {
        format!("{}/.jw/config", self.root())
    }

    /// The board-wide configuration stored on ZooKeeper (empty when none
    /// was set).
    pub async fn config(&self) -> Result<HashMap<String, String>> {
        let what = "cannot read the board configuration";
        let path = self.config_path();
        let read = self
            .read(what, |client| {
                let path = path.clone();
                async move { client.get_data(&path).await }
            })
            .await?;
        match read {
            Ok((data, _)) => Ok(parse(&data)),
            Err(zk::Error::NoNode) => Ok(HashMap::new()),
            Err(e) => Err(self.session().error(what, &e)),
        }
    }

    /// Sets (or with `None` removes) a configuration value, checked
    /// against its key's rule first.
    pub async fn set_config(&self, key: &str, value: Option<&str>) -> Result<()> {
        check_config(key, value)?;
        let what = format!("cannot change the board configuration ({key})");
        let path = self.config_path();
        for _ in 0..TRIES {
            let client = self.client(&what).await?;
            let (mut stored, version) = match client.get_data(&path).await {
                Ok((data, stat)) => (parse(&data), Some(stat.version)),
                Err(zk::Error::NoNode) => (HashMap::new(), None),
                Err(e) => return Err(self.session().error(&what, &e)),
            };
            match value {
                Some(v) => stored.insert(key.to_owned(), v.to_owned()),
                None => stored.remove(key),
            };
            let bytes = serde_json::to_vec(&stored).map_err(|e| Error::codec(e.to_string()))?;
            let persistent = &self.session().access().persistent();
            let written = match version {
                Some(v) => client.set_data(&path, &bytes, Some(v)).await.map(drop),
                None => client.create(&path, &bytes, persistent).await.map(drop),
            };
            match written {
                Ok(()) => return Ok(()),
                // No `R/.jw` yet: make it, then try again.
                Err(zk::Error::NoNode) if version.is_none() => {
                    let parent = format!("{}/.jw", self.root());
                    if let Err(e) = client.mkdir(&parent, persistent).await {
                        return Err(self.session().error(&what, &e));
                    }
                }
                // Changed, made or removed meanwhile: read again.
                Err(zk::Error::BadVersion | zk::Error::NodeExists | zk::Error::NoNode) => {}
                Err(e) => return Err(self.session().error(&what, &e)),
            }
        }
        Err(self.keeps_changing(&what))
    }
}
