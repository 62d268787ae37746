//! One log line per job outcome, at INFO (WARN for a trashed job or a lost
//! lease): completed with its run time, retrying with the reason and when,
//! trashed with its failure group and reason. Fields name what they hold
//! (`reason`, not `error`, since a reason already starts with its kind).

use std::time::Duration;

use crate::error::Error;
use crate::job::failure_group;
use crate::worker::job::{Finished, Interrupt};

/// How a finished job was settled on the board.
pub(crate) enum Settled {
    /// Consumed.
    Completed,
    /// Given back to retry after `delay`.
    Retrying { reason: String, delay: Duration },
    /// Trashed with `reason` (fatal, or its attempts used up).
    Trashed { reason: String },
    /// Given back without counting an attempt.
    Released,
    /// Nothing was recorded: the lease was lost or cancelled, or the job
    /// was given back at shutdown (the interrupt says which).
    Dropped(Interrupt),
}

/// Logs how `job` was settled, or why it could not be.
pub(crate) fn settled(job: &Finished, result: Result<Settled, Error>) {
    let (id, queue, name, attempt) = (&job.key.0, &job.key.2, &job.name, job.attempt);
    match result {
        Ok(Settled::Completed) => {
            let took = format!("{:.3}s", job.started.elapsed().as_secs_f64());
            tracing::info!(job = %id, %queue, %name, attempt, took, "job completed")
        }
        Ok(Settled::Retrying { reason, delay }) => {
            let retry_in = format!("{:.3}s", delay.as_secs_f64());
            tracing::info!(job = %id, %queue, %name, attempt, %reason, retry_in, "job failed; will retry")
        }
        Ok(Settled::Trashed { reason }) => {
            let group = failure_group(&reason);
            tracing::warn!(job = %id, %queue, %name, attempt, %group, %reason, "job trashed")
        }
        Ok(Settled::Released) => tracing::debug!(job = %id, %queue, %name, "job given back"),
        Ok(Settled::Dropped(Interrupt::LeaseLost)) => lease_lost(job, &"lost while the job ran"),
        Ok(Settled::Dropped(Interrupt::Cancelled)) => cancelled(job),
        // Given back at shutdown: the only other interrupt that drops one.
        Ok(Settled::Dropped(_)) => {
            tracing::debug!(job = %id, %queue, %name, "job given back at shutdown; result dropped")
        }
        Err(e) if e.is_cancelled() => cancelled(job),
        Err(e) if e.is_lease_over() => lease_lost(job, &e),
        Err(e) => {
            tracing::error!(job = %id, %queue, %name, why = %e, "cannot record the result; the lease will expire and the job run again")
        }
    }
}

/// The job runs again elsewhere: as loud as a consume that failed.
fn lease_lost(job: &Finished, why: &dyn std::fmt::Display) {
    let (id, queue, name) = (&job.key.0, &job.key.2, &job.name);
    tracing::warn!(job = %id, %queue, %name, %why, "lease lost before the result was recorded; result dropped")
}

fn cancelled(job: &Finished) {
    let (id, queue, name) = (&job.key.0, &job.key.2, &job.name);
    tracing::info!(job = %id, %queue, %name, "job cancelled before its result was recorded; result dropped")
}
