//! The watchdog of the worker loop's thread. A handler that starts on the
//! loop (`start_on_loop`) runs its first step there, where nothing else of
//! the loop runs until it returns: not its claims, not its settles, not its
//! timeouts. The heartbeat thread watches that step; one that runs past its
//! limit is treated as a handler that would not stop after its timeout: its
//! job is retried with the reason, the worker's other leases are given
//! back, and the process exits so the supervisor starts a fresh worker.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::board::{AnyBoard, Board, Presence};
use crate::job::{Abandon, Lease};
use crate::worker::backoff::Backoff;
use crate::worker::heartbeat::LeaseKey;
use crate::worker::EXIT_STUCK;

/// Longest first step on the loop for a handler without a shorter
/// timeout.
pub(crate) const FIRST_STEP_LIMIT: Duration = Duration::from_secs(10);

/// A first step on the loop, under watch.
struct FirstStep {
    key: LeaseKey,
    attempt: u32,
    timeout: Option<Duration>,
    since: Instant,
}

/// The loop's side and the heartbeat's side of the watch (clones share
/// it).
#[derive(Clone)]
pub(crate) struct LoopWatch {
    step: Arc<Mutex<Option<FirstStep>>>,
    backoff: Backoff,
    grace: Duration,
}

/// Clears the step when the first step is over, however it ended.
struct Watching<'a>(&'a LoopWatch);

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        if let Ok(mut step) = self.0.step.lock() {
            *step = None;
        }
    }
}

impl LoopWatch {
    /// A watch whose retries wait `backoff`, and that gives a step `grace`
    /// past its limit (the time an interrupted handler has to stop).
    pub(crate) fn new(backoff: Backoff, grace: Duration) -> LoopWatch {
        LoopWatch {
            step: Arc::default(),
            backoff,
            grace,
        }
    }

    /// Runs `first_step`, the first step of the handler of `key` (attempt
    /// `attempt`, `timeout` its limit if any), under watch.
    pub(crate) fn watch<T>(
        &self,
        key: &LeaseKey,
        attempt: u32,
        timeout: Option<Duration>,
        first_step: impl FnOnce() -> T,
    ) -> T {
        if let Ok(mut step) = self.step.lock() {
            *step = Some(FirstStep {
                key: key.clone(),
                attempt,
                timeout,
                since: Instant::now(),
            });
        }
        let _watching = Watching(self);
        first_step()
    }

    /// The job whose first step is past its limit and grace at `now`, and
    /// how to give it back; `None` while no step is overdue.
    pub(crate) fn overdue(&self, now: Instant) -> Option<(LeaseKey, Abandon)> {
        let step = self.step.lock().ok()?;
        let step = step.as_ref()?;
        let limit = step.timeout.map_or(FIRST_STEP_LIMIT, |t| t.min(FIRST_STEP_LIMIT));
        if now < step.since + limit + self.grace {
            return None;
        }
        let error = match step.timeout {
            Some(t) if t <= FIRST_STEP_LIMIT => format!(
                "timeout: timed out after {t:?} in its first step on the worker loop; \
                 the handler did not stop, so its worker process was replaced"
            ),
            _ => format!(
                "timeout: its first step held the worker loop for {limit:?} (a handler that \
                 starts on the loop must not block); its worker process was replaced"
            ),
        };
        let delay = self.backoff.delay(step.attempt);
        Some((step.key.clone(), Abandon::Retry { delay, error }))
    }
}

/// Ends a worker whose loop is held by the first step of `stuck`'s
/// handler: retries that job as `retry` says, gives the other `leases`
/// back (their handlers' results, if any, cannot be settled by the held
/// loop), takes the worker off the registry and exits with
/// [`EXIT_STUCK`]. Each call to the board waits at most `patience`; what
/// fails ends with its lease, as for a worker killed.
pub(crate) async fn replace_worker(
    board: Option<&AnyBoard>,
    leases: Vec<(LeaseKey, Lease)>,
    (stuck, retry): (LeaseKey, Abandon),
    owner: &str,
    patience: Duration,
) -> ! {
    tracing::error!(job = %stuck.0, "a handler's first step on the worker loop ran past its limit; replacing the worker");
    if let Some(board) = board {
        for (key, lease) in leases {
            let how = if key == stuck {
                retry.clone()
            } else {
                Abandon::Release
            };
            match tokio::time::timeout(patience, board.abandon(lease, how)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!(job = %key.0, error = %e, "cannot give the job back"),
                Err(_) => tracing::warn!(job = %key.0, "cannot give the job back: timed out"),
            }
        }
        let _ = tokio::time::timeout(patience, board.remove_worker(owner)).await;
    }
    std::process::exit(EXIT_STUCK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobId;

    fn key() -> LeaseKey {
        (JobId::from("j1".to_owned()), 3, "q".to_owned())
    }

    fn watch() -> LoopWatch {
        LoopWatch::new(Backoff::default(), Duration::from_secs(2))
    }

    #[test]
    fn a_step_is_overdue_past_its_timeout_and_the_grace_and_only_while_it_runs() {
        let w = watch();
        let seen = w.watch(&key(), 1, Some(Duration::from_secs(1)), || {
            let since = Instant::now();
            let early = w.overdue(since + Duration::from_millis(2900));
            let late = w.overdue(since + Duration::from_millis(3100));
            (early.is_none(), late)
        });
        assert!(seen.0, "not overdue before timeout + grace");
        let (k, how) = seen.1.expect("overdue after timeout + grace");
        assert_eq!(k, key());
        match how {
            Abandon::Retry { error, .. } => {
                assert!(error.starts_with("timeout: timed out after 1s"), "{error}")
            }
            other => panic!("retried, not {other:?}"),
        }
        assert!(
            w.overdue(Instant::now() + Duration::from_secs(3600)).is_none(),
            "a finished step is never overdue"
        );
    }

    #[test]
    fn a_step_without_a_timeout_is_held_to_the_first_step_limit() {
        let w = watch();
        let late = FIRST_STEP_LIMIT + Duration::from_secs(2) + Duration::from_millis(100);
        let (early, at_limit) = w.watch(&key(), 1, None, || {
            let since = Instant::now();
            (w.overdue(since + FIRST_STEP_LIMIT), w.overdue(since + late))
        });
        assert!(early.is_none(), "the grace comes after the limit");
        match at_limit.map(|(_, how)| how) {
            Some(Abandon::Retry { error, .. }) => {
                assert!(error.contains("held the worker loop for 10s"), "{error}")
            }
            other => panic!("retried, not {other:?}"),
        }
    }

    #[test]
    fn a_panicking_step_is_not_watched_after_it() {
        let w = watch();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            w.watch(&key(), 1, None, || panic!("in the first step"))
        }));
        assert!(caught.is_err());
        assert!(w.overdue(Instant::now() + Duration::from_secs(3600)).is_none());
    }
}
