//! The recurring service: posts the runs of recurring templates whose slot
//! fell due, so they are spawned on time whether or not anyone claims.
//!
//! Racing spawners (two leaders for a moment, or a claimer on Redis'
//! no-worker path) post each slot once: `recur_spawn.lua` posts only if
//! the template's next slot is still the one that was read; on ZooKeeper
//! the runs are posted in one transaction with the template's
//! version-checked new next slot (`zookeeper/recurring.rs`).

use std::time::Duration;

use crate::board::Maintenance;
use crate::error::Result;

/// How often the leader looks for due slots. A due slot must be spawned
/// within a second; 200 ms leaves margin, and an idle pass is two short
/// round trips (the server's clock, then the due templates).
pub const INTERVAL: Duration = Duration::from_millis(200);

/// One pass over `queue`; returns how many runs were posted.
pub(crate) async fn run<B: Maintenance>(board: &B, queue: &str) -> Result<usize> {
    board.spawn_recurring(queue).await
}
