//! The quickstart handlers the demo runs: one writes files into its
//! sandbox, one fails before it succeeds, one is CPU-bound.

use std::time::Duration;

use jobworker::{HandlerError, JobContext};
use serde::{Deserialize, Serialize};

/// Arguments of [`write_report`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Report title.
    pub title: String,
    /// Lines to write.
    pub lines: u32,
}

/// Writes a report into the job's sandbox and checks it back. The sandbox
/// must be empty when the job starts: nothing leaks from the job before.
#[jobworker::handler(queue = "demo", timeout = "30s")]
pub async fn write_report(cx: JobContext, args: Report) -> Result<(), HandlerError> {
    let leftovers = std::fs::read_dir(cx.sandbox())?.count();
    if leftovers != 0 {
        return Err(HandlerError::fatal(format!(
            "sandbox {} was not empty",
            cx.sandbox().display()
        )));
    }
    let path = cx.sandbox().join("report.txt");
    let body: String = (0..args.lines)
        .map(|i| format!("{}: line {i}\n", args.title))
        .collect();
    tokio::fs::write(&path, &body).await?;
    let back = tokio::fs::read_to_string(&path).await?;
    if back != body {
        return Err(HandlerError::retry_msg("report read back differently"));
    }
    Ok(())
}

/// Arguments of [`flaky`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Flaky {
    /// Tries that fail before one succeeds.
    pub fail_times: u32,
}

/// Fails its first `fail_times` tries (asking for a quick retry), then
/// succeeds.
#[jobworker::handler(queue = "demo", max_attempts = 4)]
pub async fn flaky(cx: JobContext, args: Flaky) -> Result<(), HandlerError> {
    if cx.attempt() <= args.fail_times {
        let why = format!(
            "failing try {} on purpose (fails {} times)",
            cx.attempt(),
            args.fail_times
        );
        return Err(HandlerError::retry_msg(why).after(Duration::from_millis(50)));
    }
    Ok(())
}

/// Arguments of [`crunch`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Crunch {
    /// Rounds of arithmetic.
    pub rounds: u64,
}

/// CPU-bound work in a plain (blocking) function: the worker runs it on a
/// blocking thread.
#[jobworker::handler(queue = "demo")]
pub fn crunch(_cx: JobContext, args: Crunch) -> Result<(), HandlerError> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..args.rounds {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    if x == 0 {
        return Err(HandlerError::fatal("the generator collapsed to zero"));
    }
    Ok(())
}
