//! The bench's own handler, built into every jobworker binary so that
//! `jobworker bench` can run anywhere: a no-op, or a pickup probe.

use serde::{Deserialize, Serialize};

use crate::handler::{HandlerError, JobContext};

/// The job name of the bench handler.
pub const NAME: &str = "jobworker.bench";

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

/// No-op, or a pickup probe when given one.
#[crate::handler(name = "jobworker.bench", queue = "jobworker-bench")]
async fn bench(cx: JobContext, probe: Option<Pickup>) -> Result<(), HandlerError> {
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
