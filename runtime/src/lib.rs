#![doc = include_str!("guide.md")]
#![deny(unsafe_code, missing_docs, unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

extern crate self as jobworker;

#[cfg(feature = "bench")]
#[cfg_attr(docsrs, doc(cfg(feature = "bench")))]
pub mod bench;
pub mod board;
#[cfg(feature = "cli")]
#[cfg_attr(docsrs, doc(cfg(feature = "cli")))]
pub mod cli;
pub mod codec;
#[cfg(feature = "cli")]
mod console;
mod crypto;
#[cfg(feature = "embedded")]
#[cfg_attr(docsrs, doc(cfg(feature = "embedded")))]
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
#[cfg_attr(docsrs, doc(cfg(feature = "embedded")))]
pub mod local;
pub mod maintenance;
#[cfg(feature = "web")]
#[cfg_attr(docsrs, doc(cfg(feature = "web")))]
pub mod metrics;
pub mod recurring;
pub mod redis;
pub mod schedule;
#[cfg(feature = "cli")]
#[allow(unsafe_code)]
mod startup_memory;
pub mod stats;
#[cfg(feature = "cli")]
mod supervisor;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
#[cfg(feature = "cli")]
mod web;
#[cfg(feature = "cli")]
mod worker;
#[cfg(feature = "zookeeper")]
#[cfg_attr(docsrs, doc(cfg(feature = "zookeeper")))]
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
