//! jobworker: a background-job runtime for Rust on taskflow-compatible job
//! boards.
//!
//! Applications [`post`](Board::post) jobs to a [`Board`] (Redis or
//! ZooKeeper); workers [`claim`](Board::claim) them with a lease, run them, and
//! [`consume`](Board::consume), [`abandon`](Board::abandon) or
//! [`trash`](Board::trash) them. The Redis layout is wire-compatible with
//! OpenStack taskflow's `RedisJobBoard`, so Python taskflow and jobworker can
//! share jobs.

#![deny(unsafe_code, missing_docs, unreachable_pub)]

extern crate self as jobworker;

#[cfg(feature = "bench")]
pub mod bench;
pub mod board;
#[cfg(feature = "cli")]
pub mod cli;
pub mod codec;
#[cfg(feature = "cli")]
mod console;
mod crypto;
#[cfg(feature = "embedded")]
pub mod embedded;
pub mod error;
#[cfg(any(feature = "cli", feature = "embedded"))]
#[allow(unsafe_code)]
mod fork;
#[doc(hidden)]
pub mod fuzzing;
pub mod handler;
pub mod job;
#[cfg(feature = "embedded")]
pub mod local;
pub mod maintenance;
#[cfg(feature = "web")]
pub mod metrics;
pub mod recurring;
pub mod redis;
pub mod schedule;
pub mod stats;
#[cfg(feature = "cli")]
mod supervisor;
#[cfg(feature = "cli")]
mod web;
#[cfg(feature = "cli")]
mod worker;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

pub use board::{AnyBoard, Board, BoardSpec};
pub use codec::Book;
pub use error::{Error, ErrorKind, Result};
pub use handler::{
    CancelFlag, HandlerEntry, HandlerError, HandlerErrorKind, HandlerFn, JobContext, Registry,
};
pub use job::{
    Abandon, Claimed, Dependency, JobId, JobInfo, JobState, Lease, ListFilter, NewJob, Page, Priority,
};
pub use jobworker_macros::handler;

/// Items the `#[handler]` expansion refers to; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::handler::decode_args;
    pub use inventory;
    pub use rmpv;
}
