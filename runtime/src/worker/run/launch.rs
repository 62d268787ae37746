//! Launching a claimed job: a free sandbox slot, its context, its handler
//! on the handler runtime, and its place among the running jobs.

use std::any::Any;
use std::path::PathBuf;
use std::task::{Context, Poll};
use std::time::Instant;

use futures_util::FutureExt;
use tokio::task::JoinHandle;

use crate::board::Board;
use crate::handler::panic_text;
use crate::handler::{CancelFlag, HandlerError, HandlerFn, HandlerFuture, JobContext};
use crate::job::{Abandon, Claimed};
use crate::worker::heartbeat::{key_of, LeaseKey};
use crate::worker::job::{Interrupt, Outcome, Reporter, Running};
use crate::worker::run::{Event, Worker};

impl Worker {
    /// Starts the handler of a claimed job (its lease already heartbeated)
    /// in a free sandbox slot; false when it could not start (the job was
    /// given back, or its lease was lost already).
    pub(super) async fn launch(&mut self, c: Claimed) -> bool {
        let key = key_of(&c.lease);
        let Some(cancel) = self.stoppable(&c, &key) else {
            return false;
        };
        let (slot, dir) = match self.take_slot(&key) {
            Ok(taken) => taken,
            Err(trouble) => {
                tracing::error!(job = %c.lease.job(), "{trouble}; giving the job back");
                self.stop_extending(&key);
                if let Err(e) = self.board.abandon(c.lease, Abandon::Release).await {
                    self.note_unsettled(&e);
                }
                return false;
            }
        };
        let entry = self.registry.get(&c.name).copied();
        let cx = JobContext::new(&c, dir, cancel.clone(), self.board.clone());
        let context = cx.clone();
        let reporter = self.reporter(&key, &cx, &cancel);
        let timeout = entry.and_then(|e| e.timeout).or(self.cfg.default_timeout);
        let started = Instant::now();
        let abort = match entry.map(|e| e.run) {
            Some(HandlerFn::Async(f)) => {
                let run = std::panic::AssertUnwindSafe(f(cx, c.args)).catch_unwind();
                Some(
                    self.handlers
                        .spawn(async move { reporter.report(outcome_of(run.await)) }),
                )
            }
            Some(HandlerFn::StartOnLoop(f)) => {
                let run = f(cx, c.args);
                self.loop_watch
                    .watch(&key, c.attempt, timeout, || self.start_on_loop(run, reporter))
            }
            Some(HandlerFn::Blocking(f)) => Some(self.handlers.spawn_blocking(move || {
                let run = std::panic::AssertUnwindSafe(|| f(cx, c.args));
                reporter.report(outcome_of(std::panic::catch_unwind(run)))
            })),
            None => Some(
                self.handlers
                    .spawn(async move { reporter.report(Outcome::NoHandler) }),
            ),
        }
        .map(|task| task.abort_handle());
        tracing::debug!(job = %c.lease.job(), queue = %c.lease.queue(), name = %c.name, attempt = c.attempt, "job started");
        if let (Some(h), Some(task)) = (&self.heartbeat, &abort) {
            if !h.aborts(&key, task) {
                task.abort();
            }
        }
        self.running.insert(
            key,
            Running {
                lease: c.lease,
                name: c.name,
                attempt: c.attempt,
                slot,
                cancel,
                context,
                abort,
                started,
                timeout,
                interrupt: Interrupt::None,
                stuck_at: None,
            },
        );
        true
    }

    /// A cancel flag for the handler about to start under `key`, which the
    /// heartbeat can raise itself from now on; `None` (logged) when the
    /// heartbeat has called the lease lost already: it is not started on,
    /// and runs out.
    fn stoppable(&self, c: &Claimed, key: &LeaseKey) -> Option<CancelFlag> {
        let cancel = CancelFlag::default();
        if self.heartbeat.as_ref().is_some_and(|h| !h.stops(key, &cancel)) {
            tracing::warn!(job = %c.lease.job(), queue = %c.lease.queue(), "lease lost before its handler started; not started");
            return None;
        }
        Some(cancel)
    }

    /// How the handler task of `key` reports its own outcome (no watcher
    /// task per job). A handler that finished well, uninterrupted and with
    /// no next step to post, is marked done where it ends, not only when
    /// the loop reads its outcome: a loop frozen meanwhile never would, and
    /// the watchdog then consumes it instead of giving it back to run again.
    fn reporter(&self, key: &LeaseKey, cx: &JobContext, cancel: &CancelFlag) -> Reporter {
        let events = self.events.clone();
        let done = key.clone();
        let finisher = self.heartbeat.as_ref().map(|h| h.finisher());
        let (ended, interrupted) = (cx.clone(), cancel.clone());
        Reporter::new(move |outcome| {
            if let (Some(finisher), Outcome::Returned(Ok(()))) = (&finisher, &outcome) {
                if !ended.has_next() {
                    finisher(&done, &|| !interrupted.is_cancelled());
                }
            }
            let _ = events.send(Event::Done(done, outcome));
        })
    }

    /// Polls a handler's future once on this thread (its first step), in
    /// the handler runtime's context, so that what it spawns or starts
    /// (timers, sockets) belongs there. A handler done in that step reports
    /// at once, with no task; one that waits goes on as a task of the
    /// handler runtime (that task's first poll repeats the step's last,
    /// harmlessly: a future may be polled again at any time).
    fn start_on_loop(&self, run: HandlerFuture, reporter: Reporter) -> Option<JoinHandle<()>> {
        let _context = self.handlers.enter();
        let mut run = std::panic::AssertUnwindSafe(run).catch_unwind();
        let mut step = Context::from_waker(futures_util::task::noop_waker_ref());
        match run.poll_unpin(&mut step) {
            Poll::Ready(result) => {
                reporter.report(outcome_of(result));
                None
            }
            Poll::Pending => Some(
                self.handlers
                    .spawn(async move { reporter.report(outcome_of(run.await)) }),
            ),
        }
    }

    /// A free sandbox slot for the job of `key`, emptied; the trouble
    /// when the job already runs here or no slot can be had.
    fn take_slot(&mut self, key: &LeaseKey) -> Result<(usize, PathBuf), String> {
        if self.running.contains_key(key) {
            Err("claimed a job that is already running here".to_owned())
        } else if let Some(slot) = self.free_slots.pop() {
            let prepared = if std::mem::take(&mut self.clean_slots[slot]) {
                Ok(self.sandbox.slot_dir(slot))
            } else {
                self.sandbox.prepare(slot)
            };
            prepared.map(|dir| (slot, dir)).map_err(|e| {
                self.free_slots.push(slot);
                format!("cannot prepare the sandbox ({e})")
            })
        } else {
            Err("no free sandbox slot".to_owned())
        }
    }
}

/// A handler's outcome from what it returned, or the panic it raised.
fn outcome_of(result: std::result::Result<Result<(), HandlerError>, Box<dyn Any + Send>>) -> Outcome {
    match result {
        Ok(r) => Outcome::Returned(r),
        Err(panic) => Outcome::Panicked(panic_text(panic)),
    }
}
