//! `jobworker track` and `untrack`: a tracked job's events also go to
//! their own channels.

use crate::board::{Admin, AnyBoard};
use crate::cli::job_args::JobArgs;
use crate::cli::output;
use crate::error::Result;
use crate::job::JobId;

/// Runs `track` (`on`) or `untrack`.
pub(crate) async fn run(board: &AnyBoard, a: &JobArgs, on: bool, json: bool) -> Result<()> {
    let job = JobId::from(a.id.as_str());
    let queue = a.queue.of(board, &a.id).await?;
    if on {
        board.track(&queue, &job).await?;
    } else {
        board.untrack(&queue, &job).await?;
    }
    output::say(json, if on { "tracking" } else { "untracked" }, &a.id);
    Ok(())
}
