//! The recurring report: its handler and its template.

use jobworker::board::Admin;
use jobworker::recurring::RecurringJob;
use jobworker::schedule::Rule;
use jobworker::{HandlerError, JobContext};
use serde::{Deserialize, Serialize};

/// The queue of the reports.
pub const REPORTS: &str = "reports";
/// The template's id: creating it again updates it.
pub const TEMPLATE: &str = "daily-sales";

/// What to build.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SalesReport {
    /// Where to write it.
    pub dir: String,
}

/// Builds the report: one file per run, named after the run's slot, so a
/// run repeated after a crash rewrites its own file instead of adding one.
#[jobworker::handler(queue = "reports", timeout = "10m", max_attempts = 3)]
pub async fn sales_report(cx: JobContext, args: SalesReport) -> Result<(), HandlerError> {
    let path = std::path::Path::new(&args.dir).join(format!("sales-{}.txt", cx.id()));
    std::fs::write(&path, "sales: all good\n")?;
    cx.log(&format!("wrote {}", path.display()));
    Ok(())
}

/// Creates (or updates) the template: the report at `rule`, catching up
/// at most 3 missed runs after an outage.
pub async fn schedule<B: Admin>(board: &B, rule: Rule, dir: &str) -> jobworker::Result<String> {
    let template = RecurringJob::new(sales_report::NAME, rule)
        .id(TEMPLATE)
        .args(&SalesReport { dir: dir.to_owned() })?
        .max_attempts(3)
        .backlog(3);
    board.recur(REPORTS, template).await
}

/// Every day at 07:00, Berlin time.
pub fn every_morning() -> jobworker::Result<Rule> {
    Rule::cron("0 7 * * *", "Europe/Berlin")
}
