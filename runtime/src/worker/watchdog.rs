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

/// What the watch knows, behind one lock.
#[derive(Default)]
struct State {
    /// The step under way, if any.
    step: Option<FirstStep>,
    /// The watchdog has found the step overdue and is replacing the
    /// worker: the loop must not go on, even if the step ends now.
    fired: bool,
}

/// The loop's side and the heartbeat's side of the watch (clones share
/// it).
#[derive(Clone)]
pub(crate) struct LoopWatch {
    state: Arc<Mutex<State>>,
    backoff: Backoff,
    grace: Duration,
}

/// Clears the step when the first step is over, however it ended; once
/// the watchdog fired, holds the loop's thread until the process exits,
/// so that the loop settles and claims nothing behind its back.
struct Watching<'a>(&'a LoopWatch);

impl Drop for Watching<'_> {
    fn drop(&mut self) {
        let fired = match self.0.state.lock() {
            Ok(mut state) => {
                state.step = None;
                state.fired
            }
            Err(_) => false,
        };
        if fired {
            // The watchdog exits the process; this thread waits for it.
            loop {
                std::thread::park();
            }
        }
    }
}

impl LoopWatch {
    /// A watch whose retries wait `backoff`, and that gives a step `grace`
    /// past its limit (the time an interrupted handler has to stop).
    pub(crate) fn new(backoff: Backoff, grace: Duration) -> LoopWatch {
        LoopWatch {
            state: Arc::default(),
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
        if let Ok(mut state) = self.state.lock() {
            state.step = Some(FirstStep {
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
    /// how to give it back; `None` while no step is overdue. Once it said
    /// so, the loop stays held even if the step ends (see [`Watching`]).
    pub(crate) fn overdue(&self, now: Instant) -> Option<(LeaseKey, Abandon)> {
        let mut state = self.state.lock().ok()?;
        let step = state.step.as_ref()?;
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
                "timeout: its first step held the worker loop past {limit:?} (a handler that \
                 starts on the loop must not block); its worker process was replaced"
            ),
        };
        let delay = self.backoff.delay(step.attempt);
        let key = step.key.clone();
        state.fired = true;
        Some((key, Abandon::Retry { delay, error }))
    }
}

/// Ends a worker whose loop is held by the first step of `stuck`'s
/// handler: ends the hand-off registrations of `owner` on `queues`, so
/// that posts hand it nothing more, retries the stuck job as `retry`
/// says, consumes the `leases` whose handlers finished well (`true`:
/// marked where the handler ended; the frozen loop never read it), gives
/// the others back, then gives back without counting an attempt what
/// posts handed the frozen loop (unread), takes the worker off the
/// registry and exits with [`EXIT_STUCK`]. Each call to the board waits
/// at most `patience`; what fails ends with its lease, as for a worker
/// killed.
pub(crate) async fn replace_worker(
    board: Option<&AnyBoard>,
    leases: Vec<(LeaseKey, Lease, bool)>,
    (stuck, retry): (LeaseKey, Abandon),
    (owner, queues): (&str, &[String]),
    patience: Duration,
) -> ! {
    tracing::error!(job = %stuck.0, "a handler's first step on the worker loop ran past its limit; replacing the worker");
    if let Some(board) = board {
        let queues: Vec<&str> = queues.iter().map(String::as_str).collect();
        // This board never waited, so it has read no hand-off: withdraw
        // only ends the registrations (release_unread below finds the
        // jobs handed before).
        match tokio::time::timeout(patience, board.withdraw(&queues, owner)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot end the hand-off registrations; their leases expire")
            }
            Err(_) => tracing::warn!("cannot end the hand-off registrations: timed out; their leases expire"),
        }
        let mut stuck_retried = false;
        for (key, lease, finished) in leases {
            let settled = if finished {
                tokio::time::timeout(patience, board.consume(lease))
                    .await
                    .map(|r| r.map(drop))
            } else {
                let how = if key == stuck {
                    retry.clone()
                } else {
                    Abandon::Release
                };
                tokio::time::timeout(patience, board.abandon(lease, how))
                    .await
                    .map(|r| r.map(drop))
            };
            stuck_retried |= key == stuck && matches!(settled, Ok(Ok(())));
            match settled {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(job = %key.0, error = %e, "cannot settle the job"),
                Err(_) => tracing::warn!(job = %key.0, "cannot settle the job: timed out"),
            }
        }
        // What the worker still holds was handed to the frozen loop and
        // never read (or failed to settle above): back without an attempt
        // or a crash counted. Unless the stuck job is surely off this
        // worker (retried above), it could be among them: then the
        // supervisor's recovery counts them all, the stuck job's crash
        // included.
        if stuck_retried {
            match tokio::time::timeout(patience, board.release_unread(&queues, owner)).await {
                Ok(Ok(0)) => {}
                Ok(Ok(back)) => tracing::info!(jobs = back, "gave back the jobs handed to the frozen loop"),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "cannot give back the jobs handed to the frozen loop")
                }
                Err(_) => tracing::warn!("cannot give back the jobs handed to the frozen loop: timed out"),
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
    use std::sync::mpsc::{channel, Sender};
    use std::thread::JoinHandle;

    fn key() -> LeaseKey {
        (JobId::from("j1".to_owned()), 3, "q".to_owned())
    }

    fn watch() -> LoopWatch {
        LoopWatch::new(Backoff::default(), Duration::from_secs(2))
    }

    /// A first step under watch on a thread of its own (as on the loop's),
    /// ending when told; with the time it began (no later than the
    /// watch's own start).
    fn step(w: &LoopWatch, timeout: Option<Duration>) -> (Instant, Sender<()>, JoinHandle<()>) {
        let (end, wait) = channel::<()>();
        let (began, started) = channel::<Instant>();
        let w = w.clone();
        let thread = std::thread::spawn(move || {
            w.watch(&key(), 1, timeout, || {
                began.send(Instant::now()).unwrap();
                let _ = wait.recv();
            })
        });
        (started.recv().unwrap(), end, thread)
    }

    fn retry_error(fired: Option<(LeaseKey, Abandon)>) -> String {
        match fired {
            Some((k, Abandon::Retry { error, .. })) if k == key() => error,
            other => panic!("the job retried, not {other:?}"),
        }
    }

    #[test]
    fn a_step_is_overdue_past_its_timeout_and_the_grace_and_only_while_it_runs() {
        let w = watch();
        let (since, end, thread) = step(&w, Some(Duration::from_secs(1)));
        assert!(w.overdue(since + Duration::from_millis(1500)).is_none());
        end.send(()).unwrap();
        thread.join().unwrap();
        assert!(
            w.overdue(since + Duration::from_secs(3600)).is_none(),
            "a finished step is never overdue"
        );
        let (since, _end, _thread) = step(&w, Some(Duration::from_secs(1)));
        let error = retry_error(w.overdue(since + Duration::from_millis(3100)));
        assert!(error.starts_with("timeout: timed out after 1s"), "{error}");
    }

    #[test]
    fn a_step_without_a_timeout_is_held_to_the_first_step_limit() {
        let w = watch();
        let (since, _end, _thread) = step(&w, None);
        assert!(
            w.overdue(since + FIRST_STEP_LIMIT).is_none(),
            "the grace comes after the limit"
        );
        let late = since + FIRST_STEP_LIMIT + Duration::from_millis(2100);
        let error = retry_error(w.overdue(late));
        assert!(error.contains("held the worker loop past 10s"), "{error}");
    }

    #[test]
    fn a_step_found_overdue_holds_the_loop_even_if_it_ends_just_then() {
        let w = watch();
        let (since, end, thread) = step(&w, None);
        retry_error(w.overdue(since + Duration::from_secs(3600)));
        end.send(()).unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !thread.is_finished(),
            "the loop must not go on once the watchdog replaces the worker"
        );
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
