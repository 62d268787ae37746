//! Configuration of one worker process.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::supervisor::InFlightReport;
use crate::worker::backoff::Backoff;

/// Default lease length.
pub(crate) const DEFAULT_EXPIRY: Duration = Duration::from_secs(30);
/// Default time a draining worker lets in-flight jobs finish.
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(30);
/// Default longest idle wait between checks for work (wake-ups on posts
/// come at once; this bounds the wait for jobs posted by taskflow, which
/// announce nothing).
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// What one worker process does.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WorkerConfig {
    /// Queues served, in order.
    pub queues: Vec<String>,
    /// Jobs run at once.
    pub concurrency: usize,
    /// Leases held beyond the running jobs (claimed ahead, heartbeated,
    /// started as slots free up, given back on drain or quiet).
    pub prefetch: usize,
    /// Lease length; the heartbeat extends every `expiry / 3`.
    pub expiry: Duration,
    /// How long in-flight jobs may finish after TERM/INT.
    pub grace: Duration,
    /// Longest idle wait before checking for work again.
    pub interval: Duration,
    /// Parent of `jobworker-workers/sandbox-<slot>`.
    pub workdir: PathBuf,
    /// This worker's slot number (sandbox index).
    pub slot: usize,
    /// The owner string written on claimed jobs.
    pub owner: String,
    /// Timeout for handlers that set none (`None`: no limit).
    pub default_timeout: Option<Duration>,
    /// Retry delays after failures.
    pub backoff: Backoff,
    /// Change into the sandbox directory (only when concurrency is 1; the
    /// working directory is per process).
    pub chdir: bool,
    /// Dead workers whose claims this worker gives back before it starts,
    /// as (owner, reason): the supervisor's crash recovery where it cannot
    /// reach the board itself (ZooKeeper: see `BlockingBoard`).
    pub recover: Vec<(String, String)>,
    /// Exit once the queues hold no jobs and none runs here (the worker of
    /// `--workers 0 --until-drained`; under a supervisor, it decides).
    pub until_drained: bool,
    /// Where it tells its supervisor how many jobs it runs (set by a
    /// supervisor serving its metrics).
    pub in_flight: Option<InFlightReport>,
}

impl WorkerConfig {
    /// A config for `queues` with defaults.
    pub(crate) fn new(queues: Vec<String>, owner: String) -> Self {
        WorkerConfig {
            queues,
            concurrency: 1,
            prefetch: 0,
            expiry: DEFAULT_EXPIRY,
            grace: DEFAULT_GRACE,
            interval: DEFAULT_INTERVAL,
            workdir: std::env::temp_dir(),
            slot: 0,
            owner,
            default_timeout: None,
            backoff: Backoff::default(),
            chdir: true,
            recover: Vec::new(),
            until_drained: false,
            in_flight: None,
        }
    }

    /// Checks the values.
    pub(crate) fn validate(&self) -> Result<()> {
        if self.queues.is_empty() {
            return Err(Error::invalid("a worker needs at least one queue"));
        }
        for q in &self.queues {
            crate::redis::QueueKeys::default_namespace("jw", q)?;
        }
        if self.concurrency == 0 || self.concurrency > crate::board::MAX_CLAIM_COUNT {
            return Err(Error::invalid(format!(
                "concurrency must be 1 to {}, not {}",
                crate::board::MAX_CLAIM_COUNT,
                self.concurrency
            )));
        }
        if self.concurrency + self.prefetch > crate::board::MAX_CLAIM_COUNT {
            return Err(Error::invalid(format!(
                "concurrency + prefetch must be at most {}, not {}",
                crate::board::MAX_CLAIM_COUNT,
                self.concurrency + self.prefetch
            )));
        }
        if self.expiry < Duration::from_millis(300) {
            return Err(Error::invalid("--expiry must be at least 0.3 seconds"));
        }
        if self.interval.is_zero() {
            return Err(Error::invalid("--interval must be above zero"));
        }
        if self.default_timeout.is_some_and(|t| t.is_zero()) {
            return Err(Error::invalid(
                "--timeout must be above zero (leave it out for no limit)",
            ));
        }
        if self.owner.is_empty() {
            return Err(Error::invalid("a worker needs an owner string"));
        }
        Ok(())
    }

    /// The leases claimed ahead when `--prefetch` is not given: a fifth of
    /// the concurrency, and at least half of it up to 5 (none for a worker
    /// running one job at a time, whose jobs are usually long). At a
    /// concurrency of 10, 5 instead of 2 made claims and consumes come in
    /// larger batches (0.24 script calls per job instead of 0.27) and two
    /// workers drained no-op jobs 1.02–1.12× as fast (four alternating
    /// pairs of `jobworker bench`).
    pub(crate) fn default_prefetch(concurrency: usize) -> usize {
        (concurrency / 5).max(concurrency.min(10) / 2)
    }

    /// How often the heartbeat extends the leases.
    pub(crate) fn beat(&self) -> Duration {
        self.expiry / 3
    }
}

#[cfg(test)]
mod tests {
    use super::WorkerConfig;

    #[test]
    fn the_default_prefetch_is_a_fifth_and_at_least_half_up_to_five() {
        let got: Vec<usize> = [1, 2, 4, 5, 10, 25, 50, 100]
            .iter()
            .map(|&c| WorkerConfig::default_prefetch(c))
            .collect();
        assert_eq!(got, [0, 1, 2, 2, 5, 5, 10, 20]);
    }
}
