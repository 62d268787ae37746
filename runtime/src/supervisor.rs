//! The supervisor: a single-threaded parent that forks worker processes
//! before any async runtime or thread exists, waits for them, respawns them
//! with backoff, forwards signals, and gives a dead worker's leases back at
//! once.

mod children;
mod config;
mod progress;
mod relay;
mod respawn;
mod started;

pub use children::supervise;
pub(crate) use children::worker_signals;
pub use config::{SupervisorConfig, EXIT_WORKERS_CANNOT_START};
pub use respawn::{RESPAWN_BASE, RESPAWN_MAX, START_FAILURE_LIMIT, STREAK_RESET};
