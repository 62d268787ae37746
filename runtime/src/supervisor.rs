//! The supervisor: a single-threaded parent that forks worker processes
//! before any async runtime or thread exists, waits for them, respawns them
//! with backoff, forwards signals, and gives a dead worker's leases back at
//! once. It blocks until something happens (a signal, a worker's exit, a
//! log line, a deadline of its own), never on a polling timer.
//!
//! One concern per file: the loop (`run.rs`), the wait (`wait.rs`), the
//! signal table (`signals.rs`), a slot's lifecycle (`slot.rs`), forking
//! (`fork.rs`), exits (`exit.rs`), crash recovery (`recovery.rs`), the
//! crash-loop policy (`respawn.rs`), progress (`progress.rs`, `relay.rs`),
//! start notices (`started.rs`), settings (`config.rs`), its own metrics
//! (`metrics.rs`, served from the loop by `metrics_http.rs`, with the
//! workers' jobs in flight from `in_flight.rs`).

mod agent;
mod config;
mod exit;
mod fork;
mod in_flight;
mod metrics;
mod metrics_http;
mod progress;
mod recovery;
mod relay;
mod respawn;
mod run;
mod signals;
mod slot;
mod started;
mod wait;

pub(crate) use config::SupervisorConfig;
pub(crate) use in_flight::InFlightReport;
pub(crate) use respawn::START_FAILURE_LIMIT;
pub(crate) use run::supervise;
pub(crate) use signals::worker_signals;
