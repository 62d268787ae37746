//! `jobworker stats`: a queue's statistics for a day (wait and run times,
//! failures, retries).

use clap::Args;

use crate::board::{Admin, AnyBoard};
use crate::cli::job_args::QueueArg;
use crate::cli::output::{self, outln};
use crate::error::Result;
use crate::stats::parse_day;

/// `stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// The queue.
    #[command(flatten)]
    pub queue: QueueArg,
    /// The day, YYYY-MM-DD (UTC; default today).
    #[arg(long)]
    pub day: Option<String>,
}

/// Runs `stats`.
pub(crate) async fn run(board: &AnyBoard, a: &StatsArgs, json: bool) -> Result<()> {
    let day = a.day.as_deref().map(parse_day).transpose()?;
    let s = board.stats(&a.queue.queue, day).await?;
    if json {
        output::json(&output::to_json(&s)?);
        return Ok(());
    }
    outln!(
        "queue {}  day {}  failed {}  retried {}",
        s.queue,
        s.day,
        s.failed,
        s.retried
    );
    for (what, t) in [("wait", &s.wait), ("run", &s.run)] {
        outln!(
            "{what:<5} count {}  mean {:.1} ms  std-dev {:.1} ms",
            t.count,
            t.mean_ms,
            t.std_dev_ms
        );
        let buckets: Vec<String> = t.histogram.iter().map(|(b, n)| format!("{b}:{n}")).collect();
        if !buckets.is_empty() {
            outln!("      {}", buckets.join(" "));
        }
    }
    Ok(())
}
