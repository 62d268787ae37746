//! The worker registry: each worker records who and where it is, what it
//! runs and when it last beat, so operators (`jobworker workers`, the web
//! app) see the live ones. Beats and liveness are on the server's clock,
//! so hosts whose clocks disagree neither hide live workers nor keep dead
//! ones.

use std::future::Future;

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// One worker's entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// The owner string it claims with.
    pub owner: String,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Slot number under its supervisor.
    pub slot: usize,
    /// Queues it serves, in order.
    pub queues: Vec<String>,
    /// Jobs it runs at once, at most (0 when an older worker did not say).
    #[serde(default)]
    pub concurrency: usize,
    /// Start time (ms since the epoch, server clock; set by the first
    /// beat).
    pub started_ms: u64,
    /// Last heartbeat (ms since the epoch, server clock).
    pub beat_ms: u64,
    /// The entry is stale once `beat_ms + ttl_ms` has passed.
    pub ttl_ms: u64,
    /// Jobs it holds right now.
    pub jobs: Vec<String>,
}

/// The worker registry of a board.
pub trait Presence: Sync {
    /// Writes (or refreshes) a worker's entry as given (the caller stamps
    /// `beat_ms` with the server's clock).
    fn record_worker(&self, info: &WorkerInfo) -> impl Future<Output = Result<()>> + Send;

    /// Removes a worker's entry.
    fn remove_worker(&self, owner: &str) -> impl Future<Output = Result<()>> + Send;

    /// The live workers, sorted by owner (stale entries are dropped).
    fn live_workers(&self) -> impl Future<Output = Result<Vec<WorkerInfo>>> + Send;
}
