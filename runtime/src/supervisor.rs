//! The supervisor: a single-threaded parent that forks worker processes
//! before any async runtime or thread exists, waits for them, respawns them
//! with backoff, forwards signals, and gives a dead worker's leases back at
//! once.

mod children;
mod config;
mod progress;

pub use children::supervise;
pub(crate) use children::worker_signals;
pub use config::{SupervisorConfig, CRASH_LOOP_LIMIT, CRASH_LOOP_WINDOW, EXIT_CRASH_LOOP};
