//! Settling finished jobs: consume, retry or trash each by its outcome
//! (the consumes of a batch in one round trip, with the next claim when
//! there is one), and giving every job back when the worker stops.

use std::time::Duration;

use crate::board::{Board, SettleResult};
use crate::error::{Error, Result};
use crate::job::{Abandon, JobId, JobState, Lease};
use crate::worker::heartbeat::LeaseKey;
use crate::worker::job::{settle, Finished, Interrupt, Outcome, Running, Settle};
use crate::worker::log::{self, Settled};
use crate::worker::run::{Worker, STUCK_GRACE};

impl Worker {
    /// Settles finished jobs on the board and frees their slots; the jobs
    /// to consume go in one round trip.
    pub(super) async fn finish_batch(&mut self, done: Vec<(LeaseKey, Outcome)>) {
        for (key, outcome) in done {
            let Some(job) = self.running.remove(&key) else {
                continue;
            };
            self.note_run_time(job.started.elapsed());
            // Only a handler that really ended leaves its slot quiet: an
            // aborted one may still have a blocking write or a child process
            // at work there, so that slot is emptied again before reuse.
            let ended = job.interrupt == Interrupt::None && !matches!(outcome, Outcome::Cancelled);
            match self.sandbox.prepare(job.slot) {
                Ok(_) => self.clean_slots[job.slot] = ended,
                Err(e) => tracing::warn!(error = %e, "cannot empty the sandbox after a job"),
            }
            self.free_slots.push(job.slot);
            let settled = match (settle(&job, outcome), job.context.take_next()) {
                (Settle::Consume, Some((queue, next))) => self.post_next(&job, &queue, next).await,
                (settled, _) => settled,
            };
            let delay = self.cfg.backoff.delay(job.attempt);
            let (lease, finished) = job.into_parts(key);
            if settled == Settle::Consume {
                // Still heartbeated until the consume is recorded; consumed
                // with the next claim (or by flush_consumes).
                if let Some(h) = &self.heartbeat {
                    h.mark_done(&finished.key, true);
                }
                self.done.push((lease, finished));
                continue;
            }
            self.stop_extending(&finished.key);
            // A retry or trash the board refused is left to the lease's
            // expiry, which counts the attempt; but should the worker exit
            // 75 for another lease, its supervisor's release takes this
            // one too, counting nothing.
            let give_back = matches!(settled, Settle::Release);
            let result = self.settle_other(lease, settled, delay).await;
            if let (true, Err(e)) = (give_back, &result) {
                self.note_unsettled(e);
            }
            log::settled(&finished, result);
        }
    }

    /// Settles one job as `settled` says (consumes are batched by
    /// `finish_batch`, not sent here); `delay` is the backoff of a retry
    /// that names none.
    async fn settle_other(&self, lease: Lease, settled: Settle, delay: Duration) -> Result<Settled> {
        match settled {
            Settle::Consume => {
                self.board.consume(lease).await?;
                Ok(Settled::Completed)
            }
            Settle::Retry(reason, after) => {
                let delay = after.unwrap_or(delay);
                let retry = Abandon::Retry {
                    delay,
                    error: reason.clone(),
                };
                let state = self.board.abandon(lease, retry).await?;
                Ok(match state {
                    JobState::Trashed => Settled::Trashed { reason },
                    _ => Settled::Retrying { reason, delay },
                })
            }
            Settle::Trash(reason) => {
                self.board.trash(lease, &reason).await?;
                Ok(Settled::Trashed { reason })
            }
            Settle::Release => {
                self.board.abandon(lease, Abandon::Release).await?;
                Ok(Settled::Released)
            }
            Settle::Drop(interrupt) => Ok(Settled::Dropped(interrupt)),
        }
    }

    /// Posts a pipeline's next step (set with `JobContext::complete_into`)
    /// under this job's id, before this job is consumed: a step posted by an
    /// earlier try that lost its consume is recognised, not posted twice.
    pub(super) async fn post_next(&self, job: &Running, queue: &str, next: crate::job::NewJob) -> Settle {
        if let Some(why) = crate::handler::own_queue_step(job.lease.queue(), queue) {
            return Settle::Trash(why);
        }
        match self.board.post(queue, next.id(job.lease.job().clone())).await {
            Ok(_) => Settle::Consume,
            Err(e) if e.is_exists() => Settle::Consume,
            // A queue name the board refuses stays refused: no try helps.
            Err(e) if e.is_invalid() => {
                Settle::Trash(format!("cannot post the next step to queue {queue}: {e}"))
            }
            Err(e) => Settle::Retry(format!("cannot post the next step to queue {queue}: {e}"), None),
        }
    }

    /// Logs the results of consuming `finished`; with `retry`, a consume
    /// that handed its lease back (the board was not reached) goes back to
    /// `self.done` for one more try. True when some did.
    pub(super) fn log_consumed(
        &mut self,
        finished: Vec<Finished>,
        results: Vec<SettleResult>,
        retry: bool,
    ) -> bool {
        let mut again = false;
        for (job, result) in finished.into_iter().zip(results) {
            let error = match result {
                Ok(()) => None,
                Err(unsettled) if retry && unsettled.is_unavailable() => {
                    let error = unsettled.error().clone();
                    match unsettled.into_lease() {
                        Some(lease) => {
                            self.done.push((lease, job));
                            again = true;
                            continue;
                        }
                        None => Some(error),
                    }
                }
                Err(unsettled) => Some(unsettled.into()),
            };
            self.stop_extending(&job.key);
            log::settled(&job, error.map_or(Ok(Settled::Completed), Err));
        }
        again
    }

    /// Consumes the finished jobs that no claim took along (a last try:
    /// what does not take is logged and left to its lease's expiry).
    pub(super) async fn flush_consumes(&mut self) {
        if self.done.is_empty() {
            return;
        }
        let (leases, finished): (Vec<Lease>, Vec<Finished>) =
            std::mem::take(&mut self.done).into_iter().unzip();
        let results = self.board.consume_many(leases).await;
        for unsettled in results.iter().filter_map(|r| r.as_ref().err()) {
            self.note_unsettled(unsettled.error());
        }
        self.log_consumed(finished, results, false);
    }

    /// Stops the handlers of every in-flight job and gives the jobs back at
    /// once (not counted), with the jobs claimed ahead, all at the same
    /// time.
    pub(super) async fn release_all(&mut self, why: &str) {
        let jobs: Vec<(LeaseKey, Running)> = self.running.drain().collect();
        let mut leases = Vec::with_capacity(jobs.len());
        for (key, mut job) in jobs {
            job.interrupt(Interrupt::Released, STUCK_GRACE);
            self.stop_extending(&key);
            leases.push(job.lease);
        }
        let started = leases.len();
        leases.extend(self.take_ahead().await);
        for (i, (id, result)) in self.release_leases(leases).await.into_iter().enumerate() {
            match result {
                Ok(_) if i < started => tracing::info!(job = %id, why, "job given back"),
                Ok(_) => tracing::debug!(job = %id, why, "job claimed ahead given back"),
                Err(e) => tracing::warn!(job = %id, error = %e, "cannot give the job back"),
            }
        }
    }

    /// Gives `leases` back (not counted), all at the same time (a stop's
    /// calls have a deadline: see `stop.rs`); returns each job's result.
    pub(super) async fn release_leases(
        &mut self,
        leases: Vec<Lease>,
    ) -> Vec<(JobId, SettleResult<JobState>)> {
        let board = &self.board;
        let results = futures_util::future::join_all(leases.into_iter().map(|lease| async move {
            let id = lease.job().clone();
            (id, board.abandon(lease, Abandon::Release).await)
        }))
        .await;
        for (_, result) in &results {
            if let Err(unsettled) = result {
                self.note_unsettled(unsettled.error());
            }
        }
        results
    }

    /// Notes a lease this worker could not consume or give back because
    /// the board did not answer (`e`): its stop then says so
    /// ([`WorkerExit::Unsettled`](crate::worker::WorkerExit::Unsettled)),
    /// and the supervisor gives the lease back.
    pub(super) fn note_unsettled(&mut self, e: &Error) {
        self.unsettled |= e.is_unavailable();
    }

    /// The heartbeat stops extending the lease of `key`.
    pub(super) fn stop_extending(&self, key: &LeaseKey) {
        if let Some(h) = &self.heartbeat {
            h.release(key);
        }
    }
}
