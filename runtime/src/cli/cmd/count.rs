//! `jobworker count`: the jobs in a queue's listings (as taskflow counts
//! them).

use crate::board::{AnyBoard, Board};
use crate::cli::job_args::QueueArg;
use crate::cli::output::{self, outln};
use crate::error::Result;

/// Runs `count`.
pub(crate) async fn run(board: &AnyBoard, q: &QueueArg, json: bool) -> Result<()> {
    let n = board.job_count(&q.queue).await?;
    if json {
        output::json(&serde_json::json!({ "queue": q.queue, "count": n }));
    } else {
        outln!("{n}");
    }
    Ok(())
}
