//! The bench's own handler, a no-op or a pickup probe: built into every
//! jobworker binary so that `jobworker bench` can run anywhere, but
//! registered only in the workers the bench starts.

use serde::{Deserialize, Serialize};

use crate::handler::{decode_args, HandlerEntry, HandlerError, HandlerFn, JobContext};

/// The job name of the bench handler.
pub(super) const NAME: &str = "jobworker.bench";

/// A pickup probe: when the job was posted and where to report the delay.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pickup {
    /// Post time, µs since the epoch (this host's clock).
    pub posted_us: u64,
    /// Redis list the handler pushes `start - posted` (µs) to.
    pub key: String,
}

/// Microseconds since the epoch on this host.
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// The bench's handler: added to the registry only by the workers the bench
/// starts (the hidden `--with-bench-handler` flag), so no other binary
/// lists or runs it. It starts on the worker loop (its first step only
/// decodes and reads the clock), as a handler in BullMQ's or asynq's loop
/// does.
pub(crate) const ENTRY: HandlerEntry = HandlerEntry {
    name: NAME,
    queue: "jobworker-bench",
    timeout: None,
    max_attempts: None,
    file: file!(),
    line: line!(),
    run: HandlerFn::StartOnLoop(|cx, args| Box::pin(bench(cx, args))),
};

/// No-op, or a pickup probe when given one.
async fn bench(cx: JobContext, args: rmpv::Value) -> Result<(), HandlerError> {
    let probe: Option<Pickup> = decode_args(&cx, args)?;
    let Some(probe) = probe else { return Ok(()) };
    let waited = now_us().saturating_sub(probe.posted_us);
    let board = cx
        .board()
        .as_redis()
        .ok_or_else(|| HandlerError::fatal("pickup probes need a Redis board"))?;
    let mut con = board.connection();
    redis::cmd("RPUSH")
        .arg(&probe.key)
        .arg(waited)
        .query_async::<()>(&mut con)
        .await?;
    Ok(())
}
