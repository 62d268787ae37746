//! What operators look at (the web app, `/metrics`): every queue's jobs by
//! state in one cheap read, per-minute throughput, and a job's
//! dependencies both ways. Reads only; each costs O(1) or O(log n) in the
//! size of a queue, so a dashboard stays fast on a board of millions of
//! jobs.

use std::future::Future;

use serde::Serialize;

use crate::board::QueueSettings;
use crate::error::Result;
use crate::job::{JobId, JobState};

/// How many jobs of one queue are in each state. A state the backend does
/// not keep is `None` (ZooKeeper has no waiting or cancelled jobs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StateCounts {
    /// Claimable now.
    pub ready: Option<u64>,
    /// Claimable later (delay, retry backoff).
    pub scheduled: Option<u64>,
    /// Waiting for dependencies.
    pub waiting: Option<u64>,
    /// Held under a lease.
    pub claimed: Option<u64>,
    /// In the completed history.
    pub completed: Option<u64>,
    /// In the trash.
    pub trashed: Option<u64>,
    /// Cancelled (kept like the history).
    pub cancelled: Option<u64>,
    /// Postings nobody could decode.
    pub quarantined: Option<u64>,
}

impl StateCounts {
    /// The count of one state.
    pub fn get(&self, state: JobState) -> Option<u64> {
        match state {
            JobState::Ready => self.ready,
            JobState::Scheduled => self.scheduled,
            JobState::Waiting => self.waiting,
            JobState::Claimed => self.claimed,
            JobState::Completed => self.completed,
            JobState::Trashed => self.trashed,
            JobState::Cancelled => self.cancelled,
            JobState::Quarantined => self.quarantined,
        }
    }
}

/// Every state, in the order views show them.
pub const STATES: [JobState; 8] = [
    JobState::Ready,
    JobState::Scheduled,
    JobState::Waiting,
    JobState::Claimed,
    JobState::Completed,
    JobState::Trashed,
    JobState::Cancelled,
    JobState::Quarantined,
];

/// One queue at a glance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueOverview {
    /// The queue.
    pub queue: String,
    /// Its jobs by state.
    pub counts: StateCounts,
    /// When the ready job that has waited longest became ready (ms since
    /// the epoch, server clock); `None` when none is ready or the backend
    /// does not know.
    pub oldest_ready_ms: Option<i64>,
    /// Paused, limit (`None` when the backend has no settings).
    pub settings: Option<QueueSettings>,
}

/// Minutes of throughput kept (`lua/lib/stats.lua`'s MINUTES_TTL on
/// Redis; the ZooKeeper board keeps the same window).
pub(crate) const MAX_MINUTES: usize = 120;

/// Jobs finished in one minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Minute {
    /// The minute's start (ms since the epoch, server clock).
    pub at_ms: i64,
    /// Jobs consumed in it.
    pub completed: u64,
    /// Jobs trashed in it.
    pub failed: u64,
}

/// A job's dependencies, both ways, as (queue, job).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dependencies {
    /// Jobs it still waits for.
    pub depends_on: Vec<(String, JobId)>,
    /// Jobs waiting for it.
    pub dependents: Vec<(String, JobId)>,
}

/// The operators' reads of a board.
pub trait Inspect: Sync {
    /// Each queue's jobs by state, oldest ready job and settings, in the
    /// order given (one read per queue, made concurrently).
    fn overview(&self, queues: &[String]) -> impl Future<Output = Result<Vec<QueueOverview>>> + Send;

    /// The queue's completed and failed jobs per minute over the last
    /// `minutes` (at most 120), oldest first, ending with the current one.
    fn throughput(&self, queue: &str, minutes: usize) -> impl Future<Output = Result<Vec<Minute>>> + Send;

    /// A job's dependencies both ways.
    fn dependencies(&self, queue: &str, job: &JobId) -> impl Future<Output = Result<Dependencies>> + Send;
}
