//! One worker process: claims jobs in batches up to its free concurrency,
//! runs each handler in its sandbox, keeps the leases alive from a
//! heartbeat thread, and consumes, retries or trashes by the result.

mod backoff;
mod config;
mod heartbeat;
mod job;
mod log;
mod recover;
mod run;
mod sandbox;
mod watchdog;

pub(crate) use config::WorkerConfig;

pub(crate) use run::{run_worker, WorkerExit, EXIT_CANNOT_START, EXIT_STUCK, EXIT_UNSETTLED};

/// This host's name (`localhost` when it cannot be read), as workers
/// record it in their owner strings and registry entries.
pub(crate) fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}
