//! The bound on a worker's stop. The board calls a stop makes (giving
//! back the jobs claimed ahead and the running ones, the last consumes)
//! must be over [`STOP_CALLS`] after the drain's grace, or after a stop
//! now: a board that does not answer (a frozen server: each call waits
//! out its timeouts, one after another) would otherwise hold the worker
//! until its supervisor kills it, 5 s after the grace, and recovers its
//! jobs as a crash's, counting an attempt and the crash on each. What the
//! board has not taken by then, the worker leaves to its supervisor (it
//! exits with [`EXIT_UNSETTLED`](super::EXIT_UNSETTLED): given back,
//! nothing counted) or, run alone, to the leases' expiry.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::sync::watch;

use crate::worker::job::Interrupt;
use crate::worker::run::{Event, Signals, Worker, WorkerExit, STUCK_GRACE};

/// How long after the grace (or a stop now) the stop's board calls may
/// take. With the heartbeat's and the maintenance's own stops (0.5 s and
/// 1 s at most) it stays below the supervisor's 5 s between the grace and
/// its kill.
pub(super) const STOP_CALLS: Duration = Duration::from_secs(2);

impl Worker {
    /// Serves until the worker is drained or stopped, then consumes the
    /// jobs that finished since the last claim and gives back the jobs
    /// claimed ahead, all by the stop's deadline when a signal set one.
    pub(super) async fn serve_until_stopped(
        &mut self,
        signals: &mut Signals,
        inbox: &mut UnboundedReceiver<Event>,
    ) -> WorkerExit {
        let mut by = self.stop_by.subscribe();
        let served = tokio::select! {
            biased;
            exit = self.serve(signals, inbox) => Some(exit),
            () = overdue(&mut by) => None,
        };
        let Some(exit) = served else {
            self.left_by_stop();
            return WorkerExit::Clean;
        };
        let by = *self.stop_by.borrow();
        let last = async {
            self.flush_consumes().await;
            self.give_back_ahead("stopped").await;
        };
        if within(by, last).await.is_none() {
            self.left_by_stop();
        }
        exit
    }

    /// Sets the stop's deadline to `at`, unless an earlier one is set.
    pub(super) fn end_stop_calls_by(&self, at: Instant) {
        self.stop_by.send_if_modified(|by| match by {
            Some(set) if *set <= at => false,
            _ => {
                *by = Some(at);
                true
            }
        });
    }

    /// The stop's deadline passed with board calls still waiting (they
    /// are dropped): stops what still runs, and notes that leases may be
    /// left.
    fn left_by_stop(&mut self) {
        tracing::warn!(
            limit = ?STOP_CALLS,
            "the board did not take the stop's calls in time; leaving the jobs not given back to the supervisor, or to their leases' expiry"
        );
        self.unsettled = true;
        for job in self.running.values_mut() {
            job.interrupt(Interrupt::Released, STUCK_GRACE);
        }
    }
}

/// Runs `work` until `by`, if set; `None` when `by` came first (`work`
/// is dropped).
async fn within<T>(by: Option<Instant>, work: impl Future<Output = T>) -> Option<T> {
    match by {
        Some(by) => tokio::time::timeout_at(by.into(), work).await.ok(),
        None => Some(work.await),
    }
}

/// Resolves once the deadline `by` holds has passed (it may be set, or
/// brought forward, meanwhile); never while none is set.
async fn overdue(by: &mut watch::Receiver<Option<Instant>>) {
    loop {
        let at = *by.borrow_and_update();
        let Some(at) = at else {
            if by.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
            continue;
        };
        tokio::select! {
            () = tokio::time::sleep_until(at.into()) => return,
            changed = by.changed() => {
                if changed.is_err() {
                    // No one can move it any more: wait it out.
                    tokio::time::sleep_until(at.into()).await;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn overdue_waits_for_a_deadline_and_follows_one_brought_forward() {
        let (by, mut seen) = watch::channel(None);
        let none = tokio::time::timeout(Duration::from_millis(300), overdue(&mut seen)).await;
        assert!(none.is_err(), "no deadline: never overdue");
        let start = Instant::now();
        by.send_replace(Some(start + Duration::from_secs(60)));
        let waiting = tokio::spawn(async move { overdue(&mut seen).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished());
        by.send_replace(Some(start + Duration::from_millis(300)));
        tokio::time::timeout(Duration::from_secs(30), waiting)
            .await
            .expect("overdue at the deadline brought forward")
            .unwrap();
        assert!(start.elapsed() >= Duration::from_millis(300));
    }

    #[tokio::test]
    async fn work_within_a_deadline_is_cut_there_and_runs_whole_without_one() {
        let slow = || tokio::time::sleep(Duration::from_millis(500));
        let by = Some(Instant::now() + Duration::from_millis(100));
        assert_eq!(within(by, slow()).await, None);
        assert_eq!(within(None, slow()).await, Some(()));
    }
}
