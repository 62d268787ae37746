//! `jobworker cancel`: cancels jobs that have not finished (a running
//! job's handler stops).

use clap::Args;

use crate::board::{Admin, AnyBoard};
use crate::cli::job_args::JobQueueArg;
use crate::cli::output;
use crate::error::Result;

/// `cancel`.
#[derive(Debug, Args)]
pub struct CancelArgs {
    /// Job ids.
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// The job's queue.
    #[command(flatten)]
    pub queue: JobQueueArg,
    /// Also cancel every job that depends on them, in any queue.
    #[arg(long)]
    pub with_dependents: bool,
}

/// Runs `cancel`.
pub(crate) async fn run(board: &AnyBoard, a: &CancelArgs, json: bool) -> Result<()> {
    for (queue, jobs) in a.queue.group(board, &a.ids).await? {
        for (queue, id) in board.cancel(&queue, &jobs, a.with_dependents).await? {
            output::say(json, "cancelled", &format!("{queue}/{id}"));
        }
    }
    Ok(())
}
