//! The queues and their settings: `queues` lists them; `pause`, `resume`
//! and `limit` change one.

use clap::Args;

use crate::board::{Admin, AnyBoard, Board};
use crate::cli::job_args::QueueArg;
use crate::cli::output;
use crate::error::Result;

/// `limit`.
#[derive(Debug, Args)]
pub struct LimitArgs {
    /// Most jobs of the queue claimed at once across all workers.
    #[arg(required_unless_present = "none")]
    pub limit: Option<u32>,
    /// Remove the limit.
    #[arg(long, conflicts_with = "limit")]
    pub none: bool,
    /// The queue.
    #[command(flatten)]
    pub queue: QueueArg,
}

/// Runs `pause`.
pub(crate) async fn pause(board: &AnyBoard, q: &QueueArg, json: bool) -> Result<()> {
    board.pause(&q.queue).await?;
    output::say(json, "paused", &q.queue);
    Ok(())
}

/// Runs `resume`.
pub(crate) async fn resume(board: &AnyBoard, q: &QueueArg, json: bool) -> Result<()> {
    board.resume(&q.queue).await?;
    output::say(json, "resumed", &q.queue);
    Ok(())
}

/// Runs `limit`.
pub(crate) async fn limit(board: &AnyBoard, a: &LimitArgs, json: bool) -> Result<()> {
    let limit = if a.none { None } else { a.limit };
    board.set_limit(&a.queue.queue, limit).await?;
    let what = limit.map_or("no limit".to_owned(), |n| format!("limit {n}"));
    output::say(json, &what, &a.queue.queue);
    Ok(())
}

/// Runs `queues`.
pub(crate) async fn list(board: &AnyBoard, json: bool) -> Result<()> {
    let mut rows = Vec::new();
    for queue in board.queues().await? {
        let settings = board.settings(&queue).await?;
        let count = board.job_count(&queue).await?;
        rows.push(serde_json::json!({
            "queue": queue, "listed": count, "paused": settings.paused, "limit": settings.limit,
        }));
    }
    if json {
        output::json(&serde_json::Value::Array(rows));
    } else {
        let rows = rows.iter().map(|r| {
            [
                r["queue"].as_str().unwrap_or("").to_owned(),
                r["listed"].to_string(),
                if r["paused"] == true { "yes" } else { "no" }.to_owned(),
                r["limit"].as_u64().map_or("-".to_owned(), |n| n.to_string()),
            ]
        });
        output::table(&["QUEUE", "LISTED", "PAUSED", "LIMIT"], rows);
    }
    Ok(())
}
