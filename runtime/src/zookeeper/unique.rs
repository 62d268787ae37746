//! Unique keys on ZooKeeper: `R/Q/.jw/unique/<key>` (percent-encoded, as
//! tags are) holds `{"id": …, "until_ms": …}`: the job that took the key
//! and until when (server clock) it holds. A post with a key that holds
//! answers that job's id and posts nothing; otherwise its transaction takes
//! the key (creating the znode, or rewriting an expired one at the version
//! read), so of two racing posts one fails and answers the other's id.

use serde::{Deserialize, Serialize};
use zookeeper_client as zk;

use crate::error::Result;
use crate::job::JobId;
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::ZooKeeperBoard;

/// What a key's znode holds.
#[derive(Debug, Serialize, Deserialize)]
struct Holder {
    id: String,
    until_ms: i64,
}

/// The write a post's transaction makes to take a key.
#[derive(Debug, Clone)]
pub(crate) struct Take {
    /// The key's znode.
    pub path: String,
    /// `{"id", "until_ms"}` of the new job.
    pub data: Vec<u8>,
    /// The version of the expired holder to rewrite (`None`: create).
    pub version: Option<i32>,
}

impl Take {
    /// Stages the write in `w`.
    pub(crate) fn stage(
        &self,
        w: &mut zk::MultiWriter<'_>,
        persistent: &zk::CreateOptions<'_>,
    ) -> Result<(), zk::Error> {
        match self.version {
            Some(v) => w.add_set_data(&self.path, &self.data, Some(v)),
            None => w.add_create(&self.path, &self.data, persistent),
        }
    }
}

impl ZooKeeperBoard {
    /// Unique key `key` for job `id` with `ttl_ms`: `Ok` with the job that
    /// holds it now, or `Err` with the write that takes it for `id`.
    pub(crate) async fn unique_key(
        &self,
        paths: &QueuePaths,
        key: &str,
        id: &str,
        ttl_ms: i64,
    ) -> Result<std::result::Result<JobId, Take>> {
        let path = paths.unique_key(key);
        let what = format!("cannot read unique key {key} of queue {}", paths.queue);
        let now = self.now_ms();
        let found = self.read_many(&what, vec![path.clone()]).await?.pop().flatten();
        let version = match found {
            Some((data, stat)) => match serde_json::from_slice::<Holder>(&data) {
                Ok(h) if h.until_ms > now => return Ok(Ok(JobId(h.id))),
                // Expired, or unreadable: taken over.
                _ => Some(stat.version),
            },
            None => None,
        };
        self.ensure_parents(&what, std::slice::from_ref(&path)).await?;
        let holder = Holder {
            id: id.to_owned(),
            until_ms: now.saturating_add(ttl_ms),
        };
        let data = serde_json::to_vec(&holder).unwrap_or_default();
        Ok(Err(Take { path, data, version }))
    }
}
