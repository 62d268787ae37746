//! Stopping handlers: a lost or cancelled lease, a timeout, a handler that
//! will not stop, the end of the drain grace, and the signals that change
//! the worker's mode.

use std::time::Instant;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::board::Board;
use crate::job::Abandon;
use crate::worker::heartbeat::{LeaseKey, Lost};
use crate::worker::job::{Interrupt, Running};
use crate::worker::run::stop::STOP_CALLS;
use crate::worker::run::{Event, Mode, Sig, Worker, WorkerExit, STUCK_GRACE};

impl Worker {
    /// Stops the handler of a job whose lease is over (cancelled, or lost).
    pub(super) fn on_lease_lost(&mut self, key: &LeaseKey, why: Lost) {
        if self.drop_ahead(key) {
            return;
        }
        let Some(job) = self.running.get_mut(key) else {
            return;
        };
        let (id, queue) = (job.lease.job(), job.lease.queue());
        let interrupt = match why {
            Lost::Cancelled => {
                tracing::info!(job = %id, %queue, name = %job.name, "job cancelled; stopping its handler");
                Interrupt::Cancelled
            }
            Lost::Lease(why) => {
                tracing::warn!(job = %id, %queue, name = %job.name, token = job.lease.token(), why, "lease lost; stopping its handler");
                Interrupt::LeaseLost
            }
        };
        job.interrupt(interrupt, STUCK_GRACE);
    }

    /// Handles timeouts, stuck handlers and the end of the drain grace;
    /// `inbox` holds the outcomes not read yet.
    pub(super) async fn on_timer(&mut self, inbox: &mut UnboundedReceiver<Event>) -> Option<WorkerExit> {
        let now = Instant::now();
        if let Mode::Draining(until) = self.mode {
            if now >= until {
                self.read_outcomes(inbox).await;
                self.release_all("grace period over").await;
                return Some(WorkerExit::Clean);
            }
        }
        let timed_out = |job: &Running| {
            job.interrupt == Interrupt::None && job.next_deadline().is_some_and(|at| at <= now)
        };
        if self.running.values().any(timed_out) {
            // A handler that returned in time, its outcome unread yet, is
            // settled as it ended, not timed out and run again.
            self.read_outcomes(inbox).await;
        }
        let mut stuck = false;
        for (key, job) in self.running.iter_mut() {
            match job.next_deadline() {
                Some(at) if at <= now && job.interrupt == Interrupt::None => {
                    tracing::warn!(job = %job.lease.job(), name = %job.name, timeout = ?job.timeout, "job timed out; stopping it");
                    job.interrupt(Interrupt::TimedOut, STUCK_GRACE);
                    // Its handler may have returned well, unread yet: it is
                    // retried, not consumed by the watchdog.
                    if let Some(h) = &self.heartbeat {
                        h.mark_done(key, false);
                    }
                }
                Some(at) if at <= now => stuck = true,
                _ => {}
            }
        }
        if !stuck {
            return None;
        }
        self.read_outcomes(inbox).await;
        // The stuck handler itself may have ended meanwhile.
        if !self
            .running
            .values()
            .any(|job| job.stuck_at.is_some_and(|t| t <= now))
        {
            return None;
        }
        self.give_back_ahead("worker replaced").await;
        // A handler that does not yield cannot be stopped inside this
        // process: record the outcome, give the rest back, and exit so the
        // supervisor starts a fresh worker.
        let jobs: Vec<(LeaseKey, Running)> = self.running.drain().collect();
        for (key, job) in jobs {
            let id = &key.0;
            let lease = job.lease;
            let result = match job.interrupt {
                Interrupt::TimedOut if job.stuck_at.is_some_and(|t| t <= now) => {
                    let error = format!(
                        "timeout: timed out after {:?}; the handler did not stop, so its worker process was replaced",
                        job.timeout.unwrap_or_default()
                    );
                    let delay = self.cfg.backoff.delay(job.attempt);
                    tracing::error!(job = %id, name = %job.name, "handler did not stop after its timeout; replacing the worker");
                    self.board
                        .abandon(lease, Abandon::Retry { delay, error })
                        .await
                        .map(drop)
                }
                Interrupt::LeaseLost | Interrupt::Cancelled | Interrupt::Released => Ok(()),
                _ => self.board.abandon(lease, Abandon::Release).await.map(drop),
            };
            if let Err(e) = result {
                tracing::warn!(job = %id, error = %e, "cannot give the job back");
            }
        }
        Some(WorkerExit::Stuck)
    }

    /// Settles the outcomes that came in and were not read yet, before
    /// the running jobs are given back: a job that finished well is
    /// consumed (before the exit), not given back to run again. Starts
    /// nothing in the slots freed.
    async fn read_outcomes(&mut self, inbox: &mut UnboundedReceiver<Event>) {
        if let Ok(first) = inbox.try_recv() {
            self.settle_events(first, inbox).await;
        }
    }

    /// Handles a signal; `inbox` holds the outcomes not read yet.
    pub(super) async fn on_signal(
        &mut self,
        s: Sig,
        inbox: &mut UnboundedReceiver<Event>,
    ) -> Option<WorkerExit> {
        match (s, self.mode) {
            (Sig::Drain, Mode::Draining(_)) | (Sig::StopNow, _) => {
                self.end_stop_calls_by(Instant::now() + STOP_CALLS);
                self.read_outcomes(inbox).await;
                self.release_all("stopped").await;
                Some(WorkerExit::Clean)
            }
            (Sig::Drain, _) => {
                tracing::info!(in_flight = self.running.len(), grace = ?self.cfg.grace, "draining");
                let until = Instant::now() + self.cfg.grace;
                self.end_stop_calls_by(until + STOP_CALLS);
                self.mode = Mode::Draining(until);
                self.give_back_ahead("draining").await;
                None
            }
            (Sig::Quiet, Mode::Run) => {
                tracing::info!("quiet: not claiming new jobs");
                self.give_back_ahead("quiet").await;
                self.mode = Mode::Quiet;
                None
            }
            (Sig::Resume, Mode::Quiet) => {
                tracing::info!("resumed");
                self.mode = Mode::Run;
                None
            }
            (Sig::Resume, Mode::Run) => {
                // Continued after a stop (SIGSTOP): jobs handed over or
                // claimed ahead meanwhile may have outlived their leases
                // and run elsewhere by now, so none of them starts here.
                self.give_back_ahead("continued after a stop").await;
                None
            }
            _ => None,
        }
    }
}
