//! Waiting on conditions with a deadline.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// How often [`wait_until`] checks its condition.
pub const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Polls `f` every [`POLL_INTERVAL`] until it returns `true`.
///
/// Panics with `timed out after {timeout:?}: {what}` when `timeout` passes
/// first (also when one call of `f` is still pending at the deadline); `what`
/// is shown only then, so it may gather details (a log) when displayed.
/// Uses tokio's clock, so it works with paused time too.
pub async fn wait_until<F, Fut>(what: impl Display, timeout: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    wait_for(what, timeout, || {
        let check = f();
        async move { check.await.then_some(()) }
    })
    .await
}

/// Polls `f` every [`POLL_INTERVAL`] until it returns `Some`, and returns
/// that value: [`wait_until`] for a condition that yields what it found.
///
/// Panics like [`wait_until`] when `timeout` passes first.
pub async fn wait_for<T, F, Fut>(what: impl Display, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, f()).await {
            Ok(Some(found)) => return found,
            Ok(None) if Instant::now() < deadline => tokio::time::sleep(POLL_INTERVAL).await,
            _ => panic!("timed out after {timeout:?}: {what}"),
        }
    }
}

/// [`wait_for`] for tests without an async runtime: polls `f` every
/// [`POLL_INTERVAL`] on this thread until it returns `Some`.
///
/// Panics with `timed out after {timeout:?}: {what}` when `timeout` passes
/// first.
pub fn wait_for_blocking<T>(what: impl Display, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(found) = f() {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {timeout:?}: {what}"
        );
        std::thread::sleep(POLL_INTERVAL);
    }
}
