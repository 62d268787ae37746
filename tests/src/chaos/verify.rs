//! The board's word at the end of a chaos run: the state of every posted
//! job, and what is left in the queue. Whether that is right (completed,
//! or cancelled as asked) is the analysis' call.

use std::collections::{BTreeMap, HashMap};

use futures_util::stream::{self, StreamExt};
use jobworker::{AnyBoard, Board, JobId, JobState, ListFilter, Page};

/// Board calls in flight at once while checking.
const PARALLEL: usize = 16;
/// Examples kept per kind of problem.
const EXAMPLES: usize = 10;

/// What the board says after the run.
#[derive(Debug, Clone, Default)]
pub struct BoardCheck {
    /// Jobs posted.
    pub posted: usize,
    /// Every posted job's state (`None`: the board does not know it).
    pub states: HashMap<String, Option<JobState>>,
    /// Posted jobs by state (`missing` when the board does not know them).
    pub by_state: BTreeMap<String, usize>,
    /// Jobs left in the queue's listings (ready, scheduled, claimed).
    pub live_left: usize,
    /// Jobs in the queue's trash.
    pub trashed_left: usize,
    /// Examples of posted jobs neither completed nor cancelled: id, state
    /// and reason.
    pub unfinished: Vec<(String, String, String)>,
}

impl BoardCheck {
    /// Posted jobs the board shows as completed.
    pub fn completed(&self) -> usize {
        self.count(JobState::Completed)
    }

    /// Posted jobs the board shows as cancelled.
    pub fn cancelled(&self) -> usize {
        self.count(JobState::Cancelled)
    }

    /// The posted jobs the board shows as completed.
    pub fn completed_ids(&self) -> impl Iterator<Item = &str> {
        self.states
            .iter()
            .filter(|(_, s)| **s == Some(JobState::Completed))
            .map(|(id, _)| id.as_str())
    }

    /// Nothing left in the queue: no live job, none trashed.
    pub fn queue_empty(&self) -> bool {
        self.live_left == 0 && self.trashed_left == 0
    }

    fn count(&self, state: JobState) -> usize {
        self.by_state.get(state.as_str()).copied().unwrap_or(0)
    }
}

/// Checks every job of `ids` in `queue`.
pub async fn check(board: &AnyBoard, queue: &str, ids: &[JobId]) -> jobworker::Result<BoardCheck> {
    let mut out = BoardCheck {
        posted: ids.len(),
        ..BoardCheck::default()
    };
    let states: Vec<(JobId, jobworker::Result<JobState>)> = stream::iter(ids)
        .map(|id| async move { (id.clone(), board.state(queue, id).await) })
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
    for (id, state) in states {
        let state = match state {
            Ok(s) => Some(s),
            Err(e) if e.is_not_found() => None,
            Err(e) => return Err(e),
        };
        let name = state.map_or("missing", JobState::as_str).to_owned();
        let done = matches!(state, Some(JobState::Completed | JobState::Cancelled));
        if !done && out.unfinished.len() < EXAMPLES {
            let reason = board
                .show(queue, &id)
                .await
                .ok()
                .and_then(|info| info.reason)
                .unwrap_or_default();
            out.unfinished.push((id.to_string(), name.clone(), reason));
        }
        *out.by_state.entry(name).or_default() += 1;
        out.states.insert(id.to_string(), state);
    }
    let all = Page {
        offset: 0,
        limit: 1_000,
    };
    out.live_left = board.list(queue, ListFilter::Live, all).await?.len();
    out.trashed_left = board
        .list(queue, ListFilter::State(JobState::Trashed), all)
        .await?
        .len();
    Ok(out)
}
