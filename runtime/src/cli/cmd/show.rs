//! `jobworker show`: one job in detail.

use crate::board::{AnyBoard, Board};
use crate::cli::job_args::JobArgs;
use crate::cli::output;
use crate::error::Result;
use crate::job::JobId;

/// Runs `show`.
pub(crate) async fn run(board: &AnyBoard, a: &JobArgs, json: bool) -> Result<()> {
    let queue = a.queue.of(board, &a.id).await?;
    let info = board.show(&queue, &JobId::from(a.id.as_str())).await?;
    if json {
        output::json(&output::to_json(&info)?);
    } else {
        output::job_text(&info);
    }
    Ok(())
}
