//! The ZooKeeper board: taskflow's `ZookeeperJobBoard` layout, so Python
//! taskflow and jobworker share jobs, plus jobworker's own state beside it.
//!
//! # Layout
//!
//! Queue `Q` of a board connected to `host:port/R` is the taskflow board
//! whose `path` is `R/Q/jobs` (see [`ZooKeeperBoard::jobs_path`]):
//!
//! - `R/Q/jobs/jobNNNNNNNNNN`: one persistent sequential znode per job with
//!   taskflow's JSON posting `{"uuid", "name", "priority", "details"}`,
//!   written once, byte for byte as Python writes it. The job id is the
//!   posting's `uuid`; jobworker's arguments are `details["args"]`, and
//!   jobworker priorities beyond taskflow's five names show as the nearest
//!   name (the exact value is in jobworker's record).
//! - `R/Q/jobs/jobNNNNNNNNNN.lock`: the claim, an ephemeral sibling with
//!   `{"owner": "<who>", "lease_deadline_ms": …, "lease_ms": …, "claim_id":
//!   …}`. Taskflow reads only `owner`; the rest is jobworker's lease.
//! - `R/Q/.trash/…`, `R/Q/.entities/conductor/…`: taskflow's trash and
//!   entities (its rule: the last path component replaced).
//! - `R/Q/.jw/…`: jobworker's own znodes, outside the jobs path so taskflow
//!   never lists them: `ids/<uuid>` (the job's record: exact priority,
//!   attempts, retry time, last token, reason, how it ended), `delayed/
//!   <uuid>@<ms>` (not claimable before `ms`), `history/<hour>/<uuid>`
//!   (completed jobs, pruned to the history limits), `quarantine/` (job
//!   znodes nobody can read, moved aside with the reason).
//!
//! # Claims and leases
//!
//! A claim is taskflow's transaction (check the job znode's version +
//! create the ephemeral lock) with a lease deadline in the lock body; the
//! fencing token is the lock znode's creation zxid (ZooKeeper's global,
//! ever-growing transaction id), so a later claim of the job always has a
//! larger token. `extend` rewrites the deadline (version-checked); claims
//! and `reap` recover locks whose deadline passed (delete the lock, count an
//! attempt, trash the job once its attempts are used up) and never touch a
//! lock without a deadline (taskflow's claims, which live as long as their
//! session). Deadlines and retry times are on the server's clock, estimated
//! from the mtime of the znodes the board writes. A claim also ends with
//! the session that made it, as in taskflow.
//!
//! # Not supported on ZooKeeper
//!
//! Dependencies, unique keys and tracking (events) are refused with an
//! `is_unsupported` error naming ZooKeeper; the other qless features live
//! on the Redis board only.

mod board;
mod cache;
mod claim;
mod entities;
mod finish;
mod json;
mod lease;
mod options;
mod paths;
mod post;
mod posting;
mod read;
mod record;
mod recover;
mod session;
mod wait;

pub use board::ZooKeeperBoard;
pub use options::{ZooKeeperOptions, DEFAULT_HISTORY_AGE, DEFAULT_HISTORY_COUNT, DEFAULT_SESSION_TIMEOUT};
