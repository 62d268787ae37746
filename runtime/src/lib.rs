//! jobworker: a background-job runtime for Rust on taskflow-compatible job
//! boards.
//!
//! Applications [`post`](Board::post) jobs to a [`Board`] (Redis; ZooKeeper
//! later); workers [`claim`](Board::claim) them with a lease, run them, and
//! [`consume`](Board::consume), [`abandon`](Board::abandon) or
//! [`trash`](Board::trash) them. The Redis layout is wire-compatible with
//! OpenStack taskflow's `RedisJobBoard`, so Python taskflow and jobworker can
//! share jobs.

pub mod board;
pub mod cli;
pub mod codec;
pub mod embedded;
pub mod error;
pub mod job;
pub mod redis;

pub use board::{AnyBoard, Board};
pub use error::{Error, ErrorKind, Result};
pub use job::{Abandon, Claimed, JobId, JobInfo, JobState, Lease, ListFilter, NewJob, Page, Priority};
