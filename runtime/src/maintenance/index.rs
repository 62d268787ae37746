//! The index service: indexes the jobs taskflow posted straight to the
//! listings (taskflow knows nothing of jobworker's index), so that claims
//! find them in order without doing it themselves.
//!
//! Quarantine happens inside indexing: a posting that cannot be decoded is
//! moved aside with the reason (`quarantine.lua`) as the scan meets it, so
//! there is no quarantine service of its own.

use std::time::Duration;

use crate::board::Maintenance;
use crate::error::Result;

/// How often the leader indexes a queue. A taskflow posting must be
/// claimable within a second; 200 ms leaves margin for a slow pass, and an
/// idle pass is one round trip (the listings' size against the index's).
pub const INTERVAL: Duration = Duration::from_millis(200);

/// One pass over `queue`; returns how many jobs were indexed.
pub(crate) async fn run<B: Maintenance>(board: &B, queue: &str) -> Result<usize> {
    board.index_postings(queue).await
}
