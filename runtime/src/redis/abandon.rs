//! Abandoning a lease (release or retry): `abandon.lua`'s Rust twin and
//! the verb `abandon`.

use std::time::Duration;

use crate::error::Result;
use crate::job::{Abandon, JobState, Lease};
use crate::redis::board::RedisBoard;
use crate::redis::connect::Connection;
use crate::redis::keys::QueueKeys;
use crate::redis::reply::Reply;
use crate::redis::scripts::{invocation, millis, run, SCRIPTS};

impl RedisBoard {
    /// Gives a lease up (see [`Board::abandon`](crate::board::Board::abandon)).
    pub(super) async fn abandon(&self, lease: &Lease, how: Abandon) -> Result<JobState> {
        let keys = self.keys(&lease.queue)?;
        let mode = match &how {
            Abandon::Release => AbandonMode::Release,
            Abandon::Retry { delay, error } => AbandonMode::Retry { delay: *delay, error },
        };
        let reply = abandon(
            &self.conn,
            &keys,
            lease.job.as_str(),
            &lease.owner,
            lease.token,
            mode,
        )
        .await?;
        let reply = reply.accept(&keys, lease.job.as_str(), &lease.owner)?;
        JobState::parse(&reply.string(1)?)
    }
}

/// What abandon does with the job (see `lua/abandon.lua`).
pub(crate) enum AbandonMode<'a> {
    Release,
    Retry { delay: Duration, error: &'a str },
}

/// Twin of `abandon.lua`.
pub(crate) async fn abandon(
    conn: &Connection,
    keys: &QueueKeys,
    id: &str,
    who: &str,
    token: u64,
    mode: AbandonMode<'_>,
) -> Result<Reply> {
    let mut inv = invocation(&SCRIPTS.abandon, keys);
    inv.arg(id).arg(who).arg(token);
    match mode {
        AbandonMode::Release => inv.arg("release").arg(0).arg(""),
        AbandonMode::Retry { delay, error } => inv.arg("retry").arg(millis(delay)).arg(error),
    };
    inv.arg(&keys.notify);
    run(conn, &inv).await
}
