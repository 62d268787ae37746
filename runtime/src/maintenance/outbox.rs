//! The outbox service: resolves the dependency releases a queue owes
//! other queues (`consume.lua` leaves them in the queue's outbox, because
//! one script touches one queue's cluster slot).
//!
//! A consume still resolves its own releases right after `consume.lua`
//! (a dependent is ready as soon as `consume` returns, which callers rely
//! on); this service settles what that left behind: a consumer that died
//! in between, a release that failed, a claim that saw the outbox owed.

use std::time::Duration;

use crate::board::Maintenance;
use crate::error::Result;

/// How often the leader settles a queue's outbox. Releases are normally
/// resolved by the consume itself, so this only bounds how late a left-over
/// one can be; an idle pass is one round trip.
pub const INTERVAL: Duration = Duration::from_millis(250);

/// One pass over `queue`; returns how many releases were settled.
pub(crate) async fn run<B: Maintenance>(board: &B, queue: &str) -> Result<usize> {
    board.release_outbox(queue).await
}
