//! Settling finished jobs: consume, retry or trash each by its outcome
//! (the consumes of a batch in one round trip, with the next claim when
//! there is one), and giving every job back when the worker stops.

use crate::board::Board;
use crate::error::Result;
use crate::job::{Abandon, JobState};
use crate::worker::heartbeat::{key_of, LeaseKey};
use crate::worker::job::{settle, Interrupt, Outcome, Running, Settle};
use crate::worker::log::{self, Settled};
use crate::worker::run::{Worker, STUCK_GRACE};

impl Worker {
    /// Settles finished jobs on the board and frees their slots; the jobs
    /// to consume go in one round trip.
    pub(super) async fn finish_batch(&mut self, done: Vec<(LeaseKey, Outcome)>) {
        let mut consumed: Vec<Running> = Vec::new();
        for (key, outcome) in done {
            let Some(job) = self.running.remove(&key) else {
                continue;
            };
            // Only a handler that really ended leaves its slot quiet: an
            // aborted one may still have a blocking write or a child process
            // at work there, so that slot is emptied again before reuse.
            let ended = job.interrupt == Interrupt::None && !matches!(outcome, Outcome::Cancelled);
            match self.sandbox.prepare(job.slot) {
                Ok(_) => self.clean_slots[job.slot] = ended,
                Err(e) => tracing::warn!(error = %e, "cannot empty the sandbox after a job"),
            }
            self.free_slots.push(job.slot);
            let settled = settle(&job, outcome);
            if settled != Settle::Consume {
                if let Some(h) = &self.heartbeat {
                    h.release(&key);
                }
            }
            let settled = match (settled, job.context.take_next()) {
                (Settle::Consume, Some((queue, next))) => self.post_next(&job, &queue, next).await,
                (settled, _) => settled,
            };
            let result = match settled {
                Settle::Consume => {
                    // Still heartbeated until the consume is recorded.
                    consumed.push(job);
                    continue;
                }
                Settle::Retry(reason, after) => {
                    let delay = after.unwrap_or_else(|| self.cfg.backoff.delay(job.attempt));
                    let retry = Abandon::Retry {
                        delay,
                        error: reason.clone(),
                    };
                    self.board
                        .abandon(&job.lease, retry)
                        .await
                        .map(|state| match state {
                            JobState::Trashed => Settled::Trashed { reason },
                            _ => Settled::Retrying { reason, delay },
                        })
                }
                Settle::Trash(reason) => self
                    .board
                    .trash(&job.lease, &reason)
                    .await
                    .map(|()| Settled::Trashed { reason }),
                Settle::Release => self
                    .board
                    .abandon(&job.lease, Abandon::Release)
                    .await
                    .map(|_| Settled::Released),
                Settle::Drop(why) => Ok(Settled::Dropped(why)),
            };
            log::settled(&job, result);
        }
        // Consumed with the next claim (or by flush_consumes).
        self.done.extend(consumed);
    }

    /// Posts a pipeline's next step (set with `JobContext::complete_into`)
    /// under this job's id, before this job is consumed: a step posted by an
    /// earlier try that lost its consume is recognised, not posted twice.
    pub(super) async fn post_next(&self, job: &Running, queue: &str, next: crate::job::NewJob) -> Settle {
        match self.board.post(queue, next.id(job.lease.job.clone())).await {
            Ok(_) => Settle::Consume,
            Err(e) if e.is_exists() => Settle::Consume,
            Err(e) => Settle::Retry(format!("cannot post the next step to queue {queue}: {e}"), None),
        }
    }

    /// Logs the consume results of `self.done` and clears it.
    pub(super) fn log_consumed(&mut self, results: Vec<Result<()>>) {
        for (job, r) in self.done.drain(..).zip(results) {
            if let Some(h) = &self.heartbeat {
                h.release(&key_of(&job.lease));
            }
            log::settled(&job, r.map(|()| Settled::Completed));
        }
    }

    /// Consumes the finished jobs that no claim took along.
    pub(super) async fn flush_consumes(&mut self) {
        if self.done.is_empty() {
            return;
        }
        let leases: Vec<crate::job::Lease> = self.done.iter().map(|j| j.lease.clone()).collect();
        match self.board.consume_many(&leases).await {
            Ok(results) => self.log_consumed(results),
            Err(e) => {
                for job in self.done.drain(..) {
                    if let Some(h) = &self.heartbeat {
                        h.release(&key_of(&job.lease));
                    }
                    log::settled(&job, Err(e.clone()));
                }
            }
        }
    }

    /// Gives every in-flight job back at once (not counted) and stops their
    /// handlers.
    pub(super) async fn release_all(&mut self, why: &str) {
        for job in self.running.values_mut() {
            job.interrupt(Interrupt::Released, STUCK_GRACE);
            if let Some(h) = &self.heartbeat {
                h.release(&key_of(&job.lease));
            }
            match self.board.abandon(&job.lease, Abandon::Release).await {
                Ok(_) => tracing::info!(job = %job.lease.job, why, "job given back"),
                Err(e) => tracing::warn!(job = %job.lease.job, error = %e, "cannot give the job back"),
            }
        }
    }
}
