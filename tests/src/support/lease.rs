//! Leases rebuilt from their parts, for tests that use one claim twice on
//! purpose (a second consume, a stale lease): a [`Lease`] is not `Clone`;
//! and a worker's settle-and-take step with one of them.

use std::time::Duration;

use jobworker::board::{ClaimRequest, SettleResult};
use jobworker::redis::RedisBoard;
use jobworker::{Board, Claimed, Lease};

/// The same claim as `lease`, rebuilt from its parts as another process
/// holding them would.
pub fn copy_of(lease: &Lease) -> Lease {
    Lease::new(lease.queue(), lease.job().clone(), lease.owner(), lease.token())
}

/// `lease` under another owner string (the same token): a lease nobody
/// holds.
pub fn with_owner(lease: &Lease, owner: &str) -> Lease {
    Lease::new(lease.queue(), lease.job().clone(), owner, lease.token())
}

/// A worker's settle-and-take step on `queue` as `who`: consumes `done`
/// and claims one job (a lease of five minutes), in one round trip.
pub async fn settle_and_take(
    board: RedisBoard,
    queue: String,
    who: &'static str,
    done: Lease,
) -> (Vec<SettleResult>, jobworker::Result<Vec<Claimed>>) {
    let request = ClaimRequest {
        queues: &[&queue],
        who,
        expiry: Duration::from_secs(300),
        count: 1,
        holding: 0,
        hand_off: None,
    };
    board.consume_then_claim(vec![done], &request).await
}
