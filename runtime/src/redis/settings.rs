//! Queue settings: pausing and resuming claims, and the cluster-wide
//! concurrency limit.

use crate::board::QueueSettings;
use crate::error::{Error, Result};
use crate::redis::board::RedisBoard;

impl RedisBoard {
    /// Stops claims from handing out jobs of `queue` (jobs already claimed
    /// run on).
    pub async fn pause(&self, queue: &str) -> Result<()> {
        let keys = self.keys(queue)?;
        self.conn
            .query::<()>(redis::cmd("HSET").arg(keys.settings()).arg("paused").arg(1))
            .await
    }

    /// Lets claims hand out jobs of `queue` again and wakes idle workers.
    pub async fn resume(&self, queue: &str) -> Result<()> {
        let keys = self.keys(queue)?;
        let mut pipe = redis::pipe();
        pipe.atomic()
            .hdel(keys.settings(), "paused")
            .ignore()
            .add_command(self.conn.publish(&keys.notify, "resumed"))
            .ignore();
        self.conn.query_pipe::<()>(&pipe).await
    }

    /// Sets (or with `None` removes) the cluster-wide concurrency limit of
    /// `queue`: claims hand out jobs only while fewer are claimed.
    pub async fn set_limit(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        let keys = self.keys(queue)?;
        let cmd = match limit {
            Some(0) => return Err(Error::invalid("a concurrency limit must be at least 1")),
            Some(n) => redis::cmd("HSET")
                .arg(keys.settings())
                .arg("limit")
                .arg(n)
                .clone(),
            None => redis::cmd("HDEL").arg(keys.settings()).arg("limit").clone(),
        };
        self.conn.query::<()>(&cmd).await?;
        // A raised or removed limit makes room: wake the idle workers.
        self.conn
            .query::<()>(&self.conn.publish(&keys.notify, "limit"))
            .await
    }

    /// The settings of `queue`.
    pub async fn settings(&self, queue: &str) -> Result<QueueSettings> {
        let keys = self.keys(queue)?;
        let (paused, limit): (Option<String>, Option<u32>) = self
            .conn
            .query(
                redis::cmd("HMGET")
                    .arg(keys.settings())
                    .arg("paused")
                    .arg("limit"),
            )
            .await?;
        Ok(QueueSettings {
            paused: paused.as_deref() == Some("1"),
            limit,
        })
    }
}
