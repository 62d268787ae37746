//! The board's word at the end of a chaos run: the state of every posted
//! job, and what is left in the queue.

use std::collections::{BTreeMap, HashSet};

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
    /// Posted jobs by state (`missing` when the board does not know them).
    pub by_state: BTreeMap<String, usize>,
    /// Jobs left in the queue's listings (ready, scheduled, claimed).
    pub live_left: usize,
    /// Jobs in the queue's trash.
    pub trashed_left: usize,
    /// Examples of posted jobs not completed: id, state and reason.
    pub not_completed: Vec<(String, String, String)>,
    /// The posted jobs the board shows as completed.
    pub completed_ids: HashSet<String>,
}

impl BoardCheck {
    /// Posted jobs the board shows as completed.
    pub fn completed(&self) -> usize {
        self.by_state
            .get(JobState::Completed.as_str())
            .copied()
            .unwrap_or(0)
    }

    /// Posted jobs not completed: lost.
    pub fn lost(&self) -> usize {
        self.posted - self.completed()
    }

    /// Every job completed and nothing left in the queue.
    pub fn exactly_once(&self) -> bool {
        self.lost() == 0 && self.live_left == 0 && self.trashed_left == 0
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
        let name = match state {
            Ok(s) => s.as_str().to_owned(),
            Err(e) if e.is_not_found() => "missing".to_owned(),
            Err(e) => return Err(e),
        };
        if name == JobState::Completed.as_str() {
            out.completed_ids.insert(id.to_string());
        } else if out.not_completed.len() < EXAMPLES {
            let reason = board
                .show(queue, &id)
                .await
                .ok()
                .and_then(|info| info.reason)
                .unwrap_or_default();
            out.not_completed.push((id.to_string(), name.clone(), reason));
        }
        *out.by_state.entry(name).or_default() += 1;
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
