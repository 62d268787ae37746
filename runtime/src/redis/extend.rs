//! Extending a lease: `extend.lua`'s Rust twin and the verb `extend`.

use std::time::Duration;

use crate::board::validate_claim;
use crate::error::Result;
use crate::job::Lease;
use crate::redis::board::RedisBoard;
use crate::redis::connect::Connection;
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;
use crate::redis::scripts::{invocation, millis, run, SCRIPTS};

impl RedisBoard {
    /// Extends a lease (see [`Board::extend`](crate::board::Board::extend)).
    pub(super) async fn extend(&self, lease: &Lease, expiry: Duration) -> Result<()> {
        validate_claim(&lease.owner, expiry, 1)?;
        let keys = self.keys(&lease.queue)?;
        let reply = extend(
            &self.conn,
            &keys,
            lease.job.as_str(),
            &lease.owner,
            lease.token,
            expiry,
        )
        .await?;
        reply.accept(&keys, lease.job.as_str(), &lease.owner).map(drop)
    }
}

/// Twin of `extend.lua`.
pub(crate) async fn extend(
    conn: &Connection,
    keys: &QueueKeys,
    id: &str,
    who: &str,
    token: u64,
    expiry: Duration,
) -> Result<Reply> {
    let mut inv = invocation(&SCRIPTS.extend, keys);
    inv.arg(id).arg(who).arg(token).arg(millis(expiry));
    run(conn, &inv).await
}
