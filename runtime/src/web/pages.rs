//! The pages (GET): each reads what it shows from the board's capability
//! traits and renders it; nothing is loaded beyond one page of jobs.

pub(crate) mod dashboard;
pub(crate) mod failed;
pub(crate) mod job;
pub(crate) mod login;
pub(crate) mod metrics;

pub(crate) mod quarantine;
pub(crate) mod queue;
pub(crate) mod workers;

use serde::Deserialize;

/// Jobs on one page of a listing.
pub(crate) const PAGE: usize = 50;

/// The message an action leaves for the page it returns to (`?msg=`).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Message {
    pub msg: Option<String>,
}
