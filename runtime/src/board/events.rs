//! What happens on a board, as it happens: every job event as JSON (for
//! `jobworker events` and live views), and the cancels of the jobs a worker
//! holds (so it stops their handlers at once).

use std::future::Future;
use std::pin::Pin;

use futures_util::Stream;

use crate::error::Result;

/// A stream of job events (JSON objects with `event`, `queue`, `job`, `at`
/// and details).
pub type EventStream = Pin<Box<dyn Stream<Item = serde_json::Value> + Send>>;

/// A stream of the ids of jobs cancelled while a worker held them.
pub type CancelStream = Pin<Box<dyn Stream<Item = String> + Send>>;

/// The events of a board.
pub trait Events: Sync {
    /// Every job event from now on; with `tracked_only`, only tracked
    /// jobs' events.
    fn events(&self, tracked_only: bool) -> impl Future<Output = Result<EventStream>> + Send;

    /// The cancels of jobs held by `owner`, from now on; `None` when the
    /// backend tells a worker only through its refused extends.
    fn cancels_of(&self, owner: &str) -> impl Future<Output = Result<Option<CancelStream>>> + Send;
}
