//! Launching a claimed job: a free sandbox slot, its context, its handler
//! on the handler runtime, and its place among the running jobs.

use std::path::PathBuf;
use std::time::Instant;

use crate::board::Board;
use crate::handler::{CancelFlag, HandlerFn, JobContext};
use crate::job::{Abandon, Claimed};
use crate::worker::heartbeat::{key_of, LeaseKey};
use crate::worker::job::{panic_text, Interrupt, Outcome, Reporter, Running};
use crate::worker::run::{Event, Worker};

impl Worker {
    /// Starts the handler of a claimed job in a free sandbox slot; false
    /// when it could not start (the job was given back).
    pub(super) async fn launch(&mut self, c: Claimed) -> bool {
        let key = key_of(&c.lease);
        let Some((slot, dir)) = self.take_slot(&key, &c).await else {
            return false;
        };
        let entry = self.registry.get(&c.name).copied();
        let cancel = CancelFlag::default();
        let cx = JobContext::new(&c, dir, cancel.clone(), self.board.clone());
        if let Some(h) = &self.heartbeat {
            h.hold(c.lease.clone());
        }
        // The handler task reports its own outcome (no watcher task per job).
        let events = self.events.clone();
        let done = key.clone();
        let context = cx.clone();
        let reporter = Reporter::new(move |outcome| {
            let _ = events.send(Event::Done(done, outcome));
        });
        let handle = match entry.map(|e| e.run) {
            Some(HandlerFn::Async(f)) => {
                let run = std::panic::AssertUnwindSafe(f(cx, c.args));
                self.handlers.spawn(async move {
                    let outcome = match futures_util::FutureExt::catch_unwind(run).await {
                        Ok(r) => Outcome::Returned(r),
                        Err(panic) => Outcome::Panicked(panic_text(panic)),
                    };
                    reporter.report(outcome);
                })
            }
            Some(HandlerFn::Blocking(f)) => self.handlers.spawn_blocking(move || {
                let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(cx, c.args))) {
                    Ok(r) => Outcome::Returned(r),
                    Err(panic) => Outcome::Panicked(panic_text(panic)),
                };
                reporter.report(outcome);
            }),
            None => self
                .handlers
                .spawn(async move { reporter.report(Outcome::NoHandler) }),
        };
        let abort = handle.abort_handle();
        tracing::debug!(job = %c.lease.job, queue = %c.lease.queue, name = %c.name, attempt = c.attempt, "job started");
        let timeout = entry.and_then(|e| e.timeout).or(self.cfg.default_timeout);
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
                started: Instant::now(),
                timeout,
                interrupt: Interrupt::None,
                stuck_at: None,
            },
        );
        true
    }

    /// A free sandbox slot for `c`, emptied; `None` (the job given back)
    /// when the job already runs here or no slot can be had.
    async fn take_slot(&mut self, key: &LeaseKey, c: &Claimed) -> Option<(usize, PathBuf)> {
        let trouble = if self.running.contains_key(key) {
            "claimed a job that is already running here; giving it back".to_owned()
        } else if let Some(slot) = self.free_slots.pop() {
            let prepared = if std::mem::take(&mut self.clean_slots[slot]) {
                Ok(self.sandbox.slot_dir(slot))
            } else {
                self.sandbox.prepare(slot)
            };
            match prepared {
                Ok(dir) => return Some((slot, dir)),
                Err(e) => {
                    self.free_slots.push(slot);
                    format!("cannot prepare the sandbox ({e}); giving the job back")
                }
            }
        } else {
            "no free sandbox slot; giving the job back".to_owned()
        };
        tracing::error!(job = %c.lease.job, "{trouble}");
        let _ = self.board.abandon(&c.lease, Abandon::Release).await;
        None
    }
}
