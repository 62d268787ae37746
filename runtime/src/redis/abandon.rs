//! Abandoning a lease (release or retry): the verb `abandon`
//! (`abandon.lua`).

use crate::error::Result;
use crate::job::{Abandon, JobState, Lease};
use crate::redis::board::RedisBoard;
use crate::redis::scripts::{lease_invocation, millis, run_on_lease, SCRIPTS};

impl RedisBoard {
    /// Gives a lease up (see [`Board::abandon`](crate::board::Board::abandon)).
    pub(super) async fn abandon(&self, lease: &Lease, how: Abandon) -> Result<JobState> {
        let keys = self.keys(lease.queue())?;
        let mut inv = lease_invocation(&SCRIPTS.abandon, &keys, lease);
        match &how {
            Abandon::Release => inv.arg("release").arg(0).arg(""),
            Abandon::Retry { delay, error } => inv.arg("retry").arg(millis(*delay)).arg(error),
        };
        inv.arg(&keys.notify);
        let reply = run_on_lease(&self.conn, &keys, lease, &inv).await?;
        JobState::parse(&reply.string(1)?)
    }
}
