//! The Redis board's maintenance capability: per-queue leader election
//! (`leader.lua`'s Rust twin) and the services' work, each of which is the
//! verb of its own feature's file (`index.rs`, `deps.rs`, `recurring.rs`).

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

use crate::board::Maintenance;
use crate::error::Result;
use crate::redis::board::RedisBoard;
use crate::redis::connect::{retry_once, Connection};
use crate::redis::keys::QueueKeys;
use crate::redis::read;
use crate::redis::reply::Reply;
use crate::redis::scripts::millis;

/// `leader.lua`: standalone (no prelude, two keys), so it stays tiny.
static LEADER: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/leader.lua")));

/// Twin of `leader.lua`: `ttl` of zero resigns; true when `who` leads
/// after the call (for a resign: when it led and gave it up).
async fn leader(conn: &Connection, keys: &QueueKeys, who: &str, ttl: Duration) -> Result<bool> {
    let mut inv = LEADER.prepare_invoke();
    inv.key(keys.leader()).key(keys.took()).arg(who).arg(millis(ttl));
    let inv = &inv;
    let value = retry_once(|| {
        let mut con = conn.link.clone();
        async move { inv.invoke_async::<redis::Value>(&mut con).await }
    })
    .await?;
    Ok(Reply::from_value(value)?.int(1)? == 1)
}

impl Maintenance for RedisBoard {
    async fn elect(&self, queue: &str, who: &str, ttl: Duration) -> Result<bool> {
        // A ttl under a millisecond would resign instead.
        leader(
            &self.conn,
            &*self.keys(queue)?,
            who,
            ttl.max(Duration::from_millis(1)),
        )
        .await
    }

    async fn resign(&self, queue: &str, who: &str) -> Result<()> {
        leader(&self.conn, &*self.keys(queue)?, who, Duration::ZERO)
            .await
            .map(drop)
    }

    async fn leader(&self, queue: &str) -> Result<Option<String>> {
        let keys = self.keys(queue)?;
        self.conn.query(redis::cmd("GET").arg(keys.leader())).await
    }

    /// One cheap check (listings against the index's sizes) first, so an
    /// idle service costs a round trip; the scan runs only when taskflow
    /// posted something.
    async fn index_postings(&self, queue: &str) -> Result<usize> {
        let keys = self.keys(queue)?;
        if !read::has_unindexed(self, &keys).await? {
            return Ok(0);
        }
        self.index_foreign(queue).await
    }

    async fn release_outbox(&self, queue: &str) -> Result<usize> {
        self.flush_outbox(queue).await
    }

    async fn spawn_recurring(&self, queue: &str) -> Result<usize> {
        self.spawn_due(queue).await
    }
}
