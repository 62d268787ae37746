//! Supervisor settings and exit codes.

use std::net::SocketAddr;
use std::time::Duration;

use crate::board::BoardSpec;
use crate::error::{Error, Result};
use crate::worker::WorkerConfig;

/// Exit code when workers cannot start at all: every slot failed to start
/// [`START_FAILURE_LIMIT`](crate::supervisor::START_FAILURE_LIMIT) times in
/// a row before any worker ever started (bad config, sandbox in use). Crashes
/// of workers never make the supervisor exit.
pub(crate) const EXIT_WORKERS_CANNOT_START: i32 = 5;
/// Extra time after the grace before stragglers are killed.
pub(super) const SHUTDOWN_MARGIN: Duration = Duration::from_secs(5);

/// What the supervisor runs.
#[derive(Debug, Clone)]
pub(crate) struct SupervisorConfig {
    /// Worker processes to keep running.
    pub workers: usize,
    /// The template of every worker (slot and owner are set per child).
    pub worker: WorkerConfig,
    /// The board.
    pub board: BoardSpec,
    /// Stop once the queues hold no jobs (the demo).
    pub until_drained: bool,
    /// Show a progress line on stderr.
    pub progress: bool,
    /// Serve the supervisor's own metrics here (`--metrics-listen`).
    pub metrics_listen: Option<SocketAddr>,
}

impl SupervisorConfig {
    /// Checks the values.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.workers == 0 {
            return Err(Error::invalid(
                "the supervisor needs at least one worker (--workers 0 runs in-process)",
            ));
        }
        if self.workers > 1024 {
            return Err(Error::invalid(format!(
                "--workers {} is more than 1024",
                self.workers
            )));
        }
        self.worker.validate()
    }
}
