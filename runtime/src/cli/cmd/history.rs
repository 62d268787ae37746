//! `jobworker history`: a job's history.

use crate::board::{Admin, AnyBoard};
use crate::cli::job_args::JobArgs;
use crate::cli::output;
use crate::error::Result;
use crate::job::JobId;

/// A job's history: one JSON object per event with `--json` (times in ms
/// since the epoch), else a table with RFC 3339 times.
pub(crate) async fn run(board: &AnyBoard, a: &JobArgs, json: bool) -> Result<()> {
    let queue = a.queue.of(board, &a.id).await?;
    let events = board.history(&queue, &JobId::from(a.id.as_str())).await?;
    if json {
        events.iter().for_each(output::json);
        return Ok(());
    }
    let rows = events.iter().map(|e| {
        let details: Vec<String> = e
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| !matches!(k.as_str(), "event" | "at" | "job" | "queue"))
            .map(|(k, v)| format!("{k}={}", v.as_str().map_or_else(|| v.to_string(), str::to_owned)))
            .collect();
        [
            e["at"].as_i64().map_or_else(|| "-".to_owned(), output::time),
            e["event"].as_str().unwrap_or("-").to_owned(),
            output::cut(&details.join(" ")),
        ]
    });
    output::table(&["TIME", "EVENT", "DETAILS"], rows);
    Ok(())
}
