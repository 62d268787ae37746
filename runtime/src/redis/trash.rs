//! Trashing a claimed job (the dead letter): the verb `trash`
//! (`trash.lua`).

use crate::error::Result;
use crate::job::Lease;
use crate::redis::board::RedisBoard;
use crate::redis::scripts::{lease_invocation, run_on_lease, SCRIPTS};

impl RedisBoard {
    /// Trashes a claimed job (see [`Board::trash`](crate::board::Board::trash)).
    pub(super) async fn trash(&self, lease: &Lease, reason: &str) -> Result<()> {
        let keys = self.keys(lease.queue())?;
        let mut inv = lease_invocation(&SCRIPTS.trash, &keys, lease);
        inv.arg(reason);
        run_on_lease(&self.conn, &keys, lease, &inv).await.map(drop)
    }
}
