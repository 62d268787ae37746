//! Maintenance of a queue: the side work no claim should wait for
//! (indexing taskflow's postings, releasing dependents owed to other
//! queues, spawning due recurring slots), run by one elected worker per
//! queue at a time (see [`crate::maintenance`] for the runner and its
//! services).

use std::future::Future;
use std::time::Duration;

use crate::error::Result;

/// Leader election and the maintenance services' work on a board.
///
/// Leadership is per queue, so workers serving different queues share the
/// work, and (on Redis) each queue's leadership key sits in the queue's
/// own cluster slot. On ZooKeeper it is an ephemeral znode: it also ends
/// when the leader's session does (a dead worker's, or a dropped board's). A backend without these features answers every call
/// with an error for which
/// [`Error::is_unsupported`](crate::Error::is_unsupported) holds; the
/// runner then runs no services.
///
/// Every service is safe to run twice at once (two leaders for a moment,
/// or a claimer doing the work on the no-worker path): leadership spares
/// the server duplicate work, it is not needed for correctness.
pub trait Maintenance: Sync {
    /// Takes the leadership of `queue`'s maintenance for `ttl` when nobody
    /// holds it, or renews it when `who` holds it; true when `who` leads
    /// now. Atomic: two callers never both get true for the same term.
    fn elect(&self, queue: &str, who: &str, ttl: Duration) -> impl Future<Output = Result<bool>> + Send;

    /// Gives up `queue`'s leadership if `who` holds it (so another worker
    /// takes over at its next election rather than after the ttl).
    fn resign(&self, queue: &str, who: &str) -> impl Future<Output = Result<()>> + Send;

    /// Who leads `queue`'s maintenance now, if anyone.
    fn leader(&self, queue: &str) -> impl Future<Output = Result<Option<String>>> + Send;

    /// Indexes the jobs taskflow posted to `queue` that the index lacks,
    /// quarantining postings that cannot be decoded; returns how many
    /// were indexed.
    fn index_postings(&self, queue: &str) -> impl Future<Output = Result<usize>> + Send;

    /// Resolves the dependency releases `queue` owes other queues; returns
    /// how many were settled.
    fn release_outbox(&self, queue: &str) -> impl Future<Output = Result<usize>> + Send;

    /// Posts the runs of `queue`'s recurring jobs that are due; returns how
    /// many were posted.
    fn spawn_recurring(&self, queue: &str) -> impl Future<Output = Result<usize>> + Send;
}
