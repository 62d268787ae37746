//! Reaping a queue (due jobs promoted, expired leases stalled):
//! `reap.lua`'s Rust twin and the verb `reap`.

use crate::board::ReapReport;
use crate::error::Result;
use crate::redis::board::RedisBoard;
use crate::redis::connect::Connection;
use crate::redis::invocation::Invocation;
use crate::redis::keys::QueueKeys;
use crate::redis::read;
use crate::redis::reply::Reply;
use crate::redis::scripts::{run, SCRIPTS};

impl RedisBoard {
    /// Reaps `queue` (see [`Board::reap`](crate::board::Board::reap)).
    pub(super) async fn reap(&self, queue: &str) -> Result<ReapReport> {
        let keys = self.keys(queue)?;
        let reply: Reply = reap(&self.conn, &keys).await?;
        let indexed = if read::has_unindexed(self, &keys).await? {
            self.index_foreign(queue).await?
        } else {
            0
        };
        Ok(ReapReport {
            promoted: reply.int(1)? as usize,
            stalled: reply.int(2)? as usize,
            indexed,
        })
    }
}

/// Twin of `reap.lua`.
pub(crate) async fn reap(conn: &Connection, keys: &QueueKeys) -> Result<Reply> {
    run(conn, &Invocation::new(&SCRIPTS.reap, keys)).await
}
