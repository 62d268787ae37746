//! The fault-injection run (`scripts/chaos`, issue 10): a real `jobworker`
//! supervisor over N jobs while workers are SIGKILLed every 100–300 ms,
//! the whole supervisor tree is SIGKILLed and restarted once, the queue is
//! paused and resumed once with `jobworker pause`/`resume`, the board
//! server (redis-server with AOF, or ZooKeeper) is SIGKILLed and restarted
//! once, a worker is frozen with SIGSTOP past its lease (on ZooKeeper past
//! its session too), and 1 % of the jobs (at least 10) are cancelled with
//! `jobworker cancel`, two thirds while they run and the rest before. Then
//! it checks that every job was completed exactly once on the board or,
//! when its cancel was accepted, cancelled and never completed; none was
//! lost; no two runs of one job overlapped in time unless the earlier
//! run's lease had expired; and says why every job that ran more than once
//! did.
//!
//! ```no_run
//! use jobworker_tests::chaos::{self, Backend, ChaosConfig};
//!
//! let cfg = ChaosConfig::new(2_000, Backend::Redis, "target/release/jobworker");
//! let report = chaos::run(&cfg).expect("the run could not start");
//! println!("{report}");
//! assert!(report.passed(), "{:?}", report.failures());
//! ```
//!
//! How it knows: the jobs are the scripted handler (sleeping 5–30 ms; the
//! jobs to cancel while they run 2–4 s) with a run log, where every run
//! writes `start <id> <pid> <token> <µs>` and `end … <outcome>` (a killed
//! run has no end: its end is when its process was seen dead). The run
//! records the wall-clock time of every kill, freeze, restart and cancel
//! on the same clock, and what each `jobworker cancel` answered. The board
//! is asked for the state of every posted job at the end; the workers'
//! logs tell which consumes it accepted.
//!
//! Pieces, one per file: [`config`] (what to run), [`driver`] (the run),
//! [`faults`] (the plan), [`cancels`] (the cancels), [`supervisor`] and
//! [`procs`] (the processes), [`server`] (the board server), [`runs`] (the
//! run log), [`events`] (what the run did), [`evidence`] (expired leases
//! and completions on record), [`verify`] (the board's word), [`analysis`]
//! (overlaps, duplicates, how each job ended), [`report`].

pub mod analysis;
pub mod cancels;
pub mod config;
pub mod driver;
pub mod events;
pub mod evidence;
pub mod faults;
pub mod procs;
pub mod report;
pub mod rng;
pub mod runs;
pub mod server;
pub mod supervisor;
pub mod verify;

pub use config::{Appendfsync, Backend, ChaosConfig};
pub use driver::run;
pub use report::Report;
