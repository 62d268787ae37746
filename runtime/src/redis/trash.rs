//! Trashing a claimed job (the dead letter): `trash.lua`'s Rust twin and
//! the verb `trash`.

use crate::error::Result;
use crate::job::Lease;
use crate::redis::board::RedisBoard;
use crate::redis::connect::Connection;
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;
use crate::redis::scripts::{invocation, run, SCRIPTS};

impl RedisBoard {
    /// Trashes a claimed job (see [`Board::trash`](crate::board::Board::trash)).
    pub(super) async fn trash(&self, lease: &Lease, reason: &str) -> Result<()> {
        let keys = self.keys(&lease.queue)?;
        let reply = trash(
            &self.conn,
            &keys,
            lease.job.as_str(),
            &lease.owner,
            lease.token,
            reason,
        )
        .await?;
        reply.accept(&keys, lease.job.as_str(), &lease.owner).map(drop)
    }
}

/// Twin of `trash.lua`.
pub(crate) async fn trash(
    conn: &Connection,
    keys: &QueueKeys,
    id: &str,
    who: &str,
    token: u64,
    reason: &str,
) -> Result<Reply> {
    let mut inv = invocation(&SCRIPTS.trash, keys);
    inv.arg(id).arg(who).arg(token).arg(reason);
    run(conn, &inv).await
}
