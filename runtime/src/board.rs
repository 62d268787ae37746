//! The board: the taskflow contract every backend implements ([`Board`]),
//! the capabilities beyond it as traits both backends implement
//! ([`Admin`], [`Events`], [`Presence`], [`Recovery`], [`Maintenance`]), and the one place
//! that names the backends: [`BoardSpec`] (where a board is) and
//! [`AnyBoard`] (a connected board of either kind).
//!
//! Code outside the backends calls these traits and never branches on the
//! backend; a backend that truly cannot offer a capability answers with an
//! error for which [`Error::is_unsupported`](crate::Error::is_unsupported)
//! is true.

mod admin;
#[cfg(all(feature = "cli", feature = "zookeeper"))]
pub(crate) mod agent;
mod any;
#[cfg(feature = "cli")]
mod blocking;
pub(crate) mod config;
mod contract;
mod events;
mod follow;
mod inspect;
mod lease;
mod maintenance;
mod presence;
mod queue_name;
mod recovery;
mod spec;

pub use admin::{Admin, FailureGroup, QueueCounts, QueueSettings};
pub use any::AnyBoard;
#[cfg(feature = "cli")]
pub(crate) use blocking::BlockingBoard;
pub use config::CONFIG_KEYS;
pub(crate) use contract::validate_claim;
pub use contract::{Board, ClaimRequest, ReapReport, Woken, MAX_CLAIM_COUNT};
pub use events::{CancelStream, EventStream, Events};
pub use follow::{follow, Followed};
pub(crate) use inspect::MAX_MINUTES;
pub use inspect::{Dependencies, Inspect, Minute, QueueOverview, StateCounts, STATES};
pub(crate) use lease::{lease_back, leases_back};
pub use lease::{Lease, SettleResult, Unsettled};
pub use maintenance::Maintenance;
pub use presence::{Presence, WorkerInfo};
pub(crate) use queue_name::check_new_queue;
pub use recovery::{Recovered, Recovery};
pub use spec::BoardSpec;
