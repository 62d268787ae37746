//! `jobworker workers`: the live workers.

use crate::board::{Admin, AnyBoard, Presence};
use crate::cli::output::{self, outln};
use crate::error::Result;

/// Runs `workers`.
pub(crate) async fn run(board: &AnyBoard, json: bool) -> Result<()> {
    let list = board.live_workers().await?;
    if json {
        output::json(&output::to_json(&list)?);
    } else if list.is_empty() {
        outln!("no live workers");
    } else {
        let now = board.server_ms().await?.max(0) as u64;
        let rows = list.iter().map(|w| {
            [
                w.owner.clone(),
                w.host.clone(),
                w.pid.to_string(),
                w.queues.join(","),
                w.jobs.len().to_string(),
                output::time(w.started_ms as i64),
                format!("{:.1}s ago", now.saturating_sub(w.beat_ms) as f64 / 1000.0),
            ]
        });
        output::table(
            &["OWNER", "HOST", "PID", "QUEUES", "JOBS", "STARTED", "BEAT"],
            rows,
        );
    }
    Ok(())
}
