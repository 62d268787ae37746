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

pub use backoff::Backoff;
pub use config::{WorkerConfig, DEFAULT_EXPIRY, DEFAULT_GRACE, DEFAULT_INTERVAL};

pub use run::{run_worker, WorkerExit, EXIT_CANNOT_START, EXIT_STUCK};
pub use sandbox::Sandbox;
