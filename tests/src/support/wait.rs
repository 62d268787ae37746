//! Waiting on conditions with a deadline.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How often [`wait_until`] checks its condition.
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Polls `f` every [`POLL_INTERVAL`] until it returns `true`.
///
/// Panics with `timed out after {timeout:?}: {what}` when `timeout` passes
/// first (also when one call of `f` is still pending at the deadline). Uses
/// tokio's clock, so it works with paused time too.
pub async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, f()).await {
            Ok(true) => return,
            Ok(false) if Instant::now() < deadline => tokio::time::sleep(POLL_INTERVAL).await,
            _ => panic!("timed out after {timeout:?}: {what}"),
        }
    }
}
