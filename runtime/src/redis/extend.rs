//! Extending a lease: the verb `extend` (`extend.lua`).

use std::time::Duration;

use crate::board::validate_claim;
use crate::error::Result;
use crate::job::Lease;
use crate::redis::board::RedisBoard;
use crate::redis::scripts::{lease_invocation, millis, run_on_lease, SCRIPTS};

impl RedisBoard {
    /// Extends a lease (see [`Board::extend`](crate::board::Board::extend)).
    pub(super) async fn extend(&self, lease: &Lease, expiry: Duration) -> Result<()> {
        validate_claim(lease.owner(), expiry, 1)?;
        let keys = self.keys(lease.queue())?;
        let mut inv = lease_invocation(&SCRIPTS.extend, &keys, lease);
        inv.arg(millis(expiry));
        run_on_lease(&self.conn, &keys, lease, &inv).await.map(drop)
    }
}
