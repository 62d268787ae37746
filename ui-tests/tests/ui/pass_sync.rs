//! A plain (blocking) handler with typed arguments.

use jobworker::{HandlerError, HandlerFn, JobContext, Registry};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Report {
    day: String,
}

#[jobworker::handler(queue = "reports", max_attempts = 2)]
fn daily_report(cx: JobContext, args: Report) -> Result<(), HandlerError> {
    cx.log(&args.day);
    Ok(())
}

fn main() {
    let registry = Registry::load().unwrap();
    let entry = registry.get("daily_report").expect("named after the function");
    assert_eq!(entry.name, "daily_report");
    assert_eq!(entry.queue, "reports");
    assert_eq!(entry.timeout, None);
    assert_eq!(entry.max_attempts, Some(2));
    assert!(matches!(entry.run, HandlerFn::Blocking(_)));

    let job = daily_report::job(&Report { day: "monday".into() }).unwrap();
    assert_eq!(job.name, "daily_report");
    assert_eq!(job.max_attempts, 2);
    assert_eq!(daily_report::QUEUE, "reports");
}
