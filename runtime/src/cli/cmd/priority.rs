//! `jobworker priority`: changes the priority of a job that has not run yet.

use clap::Args;

use crate::board::{Admin, AnyBoard};
use crate::cli::job_args::JobQueueArg;
use crate::cli::output;
use crate::error::Result;
use crate::job::{JobId, Priority};

/// `priority`.
#[derive(Debug, Args)]
pub struct PriorityArgs {
    /// The job id.
    pub id: String,
    /// New priority: an integer (higher first) or a taskflow name.
    #[arg(allow_hyphen_values = true)]
    pub priority: String,
    /// The job's queue.
    #[command(flatten)]
    pub queue: JobQueueArg,
}

/// Runs `priority`.
pub(crate) async fn run(board: &AnyBoard, a: &PriorityArgs, json: bool) -> Result<()> {
    let prio = Priority::parse(&a.priority)?;
    let queue = a.queue.of(board, &a.id).await?;
    let state = board
        .set_priority(&queue, &JobId::from(a.id.as_str()), prio)
        .await?;
    output::say(json, &format!("priority {} ({state})", prio.0), &a.id);
    Ok(())
}
