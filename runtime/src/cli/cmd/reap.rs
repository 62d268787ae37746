//! `jobworker reap`: promotes due jobs, recovers expired leases and
//! indexes taskflow's jobs.

use crate::board::{AnyBoard, Board};
use crate::cli::job_args::QueueArg;
use crate::cli::output::{self, outln};
use crate::error::Result;

/// Runs `reap`.
pub(crate) async fn run(board: &AnyBoard, q: &QueueArg, json: bool) -> Result<()> {
    let r = board.reap(&q.queue).await?;
    if json {
        output::json(&output::to_json(&r)?);
    } else {
        outln!(
            "promoted {}, recovered {} expired leases, indexed {}",
            r.promoted,
            r.stalled,
            r.indexed
        );
    }
    Ok(())
}
