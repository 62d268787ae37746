//! `jobworker list`: a queue's jobs.

use clap::Args;

use crate::board::{AnyBoard, Board};
use crate::cli::job_args::QueueArg;
use crate::cli::output;
use crate::error::Result;
use crate::job::{JobState, ListFilter, Page};

/// `list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The queue.
    #[command(flatten)]
    pub queue: QueueArg,
    /// Only this state (ready, scheduled, waiting, claimed, completed, trashed,
    /// cancelled, quarantined).
    #[arg(long)]
    pub state: Option<String>,
    /// Entries to skip.
    #[arg(long, default_value_t = 0)]
    pub offset: usize,
    /// Entries to show.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

/// Runs `list`.
pub(crate) async fn run(board: &AnyBoard, a: &ListArgs, json: bool) -> Result<()> {
    let filter = match &a.state {
        Some(s) => ListFilter::State(JobState::parse(s)?),
        None => ListFilter::Live,
    };
    let page = Page {
        offset: a.offset,
        limit: a.limit,
    };
    let jobs = board.list(&a.queue.queue, filter, page).await?;
    if json {
        output::json(&output::to_json(&jobs)?);
    } else {
        output::jobs_text(&jobs);
    }
    Ok(())
}
