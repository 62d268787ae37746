//! One job in flight and how its outcome settles it on the board.

use std::time::{Duration, Instant};

use tokio::task::AbortHandle;

use crate::handler::{CancelFlag, HandlerError, HandlerErrorKind};
use crate::job::Lease;
use crate::worker::heartbeat::LeaseKey;

/// Why the worker interrupted a job, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interrupt {
    /// Not interrupted.
    None,
    /// Ran past its timeout.
    TimedOut,
    /// Its lease was lost: the result must be dropped.
    LeaseLost,
    /// The job was cancelled: the result must be dropped.
    Cancelled,
    /// The worker is shutting down and already gave the job back.
    Released,
}

/// A job in flight.
pub(crate) struct Running {
    pub lease: Lease,
    pub name: String,
    pub attempt: u32,
    pub slot: usize,
    pub cancel: CancelFlag,
    /// The handler's context (holds a pipeline's next step).
    pub context: crate::handler::JobContext,
    /// The handler's task (none for a handler that finished in its first
    /// step on the loop).
    pub abort: Option<AbortHandle>,
    pub started: Instant,
    pub timeout: Option<Duration>,
    pub interrupt: Interrupt,
    /// When an interrupted handler that has not stopped counts as stuck.
    pub stuck_at: Option<Instant>,
}

/// A job whose handler is over, as its log line names it.
pub(crate) struct Finished {
    pub key: LeaseKey,
    pub name: String,
    pub attempt: u32,
    pub started: Instant,
}

impl Running {
    /// Splits a job that is over into the lease to settle it with and what
    /// its log line needs.
    pub(super) fn into_parts(self, key: LeaseKey) -> (Lease, Finished) {
        let finished = Finished {
            key,
            name: self.name,
            attempt: self.attempt,
            started: self.started,
        };
        (self.lease, finished)
    }

    /// When the worker must next look at this job.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        match (self.interrupt, self.timeout) {
            (Interrupt::None, Some(t)) => Some(self.started + t),
            _ => self.stuck_at,
        }
    }

    /// Interrupts the handler: raises its cancel flag and aborts its task
    /// (which stops an async handler at its next await).
    pub(super) fn interrupt(&mut self, why: Interrupt, stuck_grace: Duration) {
        self.interrupt = why;
        self.cancel.cancel();
        if let Some(task) = &self.abort {
            task.abort();
        }
        self.stuck_at = Some(Instant::now() + stuck_grace);
    }
}

/// What to do with a finished job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Settle {
    /// Done: consume.
    Consume,
    /// Count an attempt and retry (after the given delay, or the backoff).
    Retry(String, Option<Duration>),
    /// Give up: trash with the reason.
    Trash(String),
    /// Give the job back without counting an attempt.
    Release,
    /// Nothing to do: the lease is gone or was already given back (the
    /// interrupt says which).
    Drop(Interrupt),
}

/// How a handler task ended.
pub(crate) enum Outcome {
    /// The handler returned.
    Returned(Result<(), HandlerError>),
    /// The handler panicked, with this message.
    Panicked(String),
    /// The task was aborted before the handler returned.
    Cancelled,
    /// No handler of the job's name is linked into this worker.
    NoHandler,
}

/// Reports a handler task's outcome from inside the task; a task dropped
/// before reporting (aborted) reports [`Outcome::Cancelled`].
pub(crate) struct Reporter {
    send: Option<Box<dyn FnOnce(Outcome) + Send>>,
}

impl Reporter {
    /// A reporter calling `send` exactly once.
    pub(super) fn new(send: impl FnOnce(Outcome) + Send + 'static) -> Reporter {
        Reporter {
            send: Some(Box::new(send)),
        }
    }

    /// Reports how the handler ended.
    pub(super) fn report(mut self, outcome: Outcome) {
        if let Some(send) = self.send.take() {
            send(outcome);
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        if let Some(send) = self.send.take() {
            send(Outcome::Cancelled);
        }
    }
}

/// Decides how to settle `job` from its handler's outcome. Failure reasons
/// start with their kind (`error:`, `fatal:`, `panicked:`, `timeout:`,
/// `no-handler:`), which names the failure group a trashed job lands in:
/// jobs whose handler is not deployed wait in `no-handler` for `retry
/// --group no-handler` once it is.
pub(crate) fn settle(job: &Running, outcome: Outcome) -> Settle {
    decide(job.interrupt, outcome, job.timeout, || {
        format!(
            "no handler named {:?} is linked into worker {}",
            job.name,
            job.lease.owner()
        )
    })
}

/// The settling policy: what an interrupt, or else the handler's outcome,
/// makes of the job (`no_handler` says why when none was linked in).
fn decide(
    interrupt: Interrupt,
    outcome: Outcome,
    timeout: Option<Duration>,
    no_handler: impl FnOnce() -> String,
) -> Settle {
    match (interrupt, outcome) {
        (Interrupt::LeaseLost | Interrupt::Cancelled | Interrupt::Released, _) => Settle::Drop(interrupt),
        (Interrupt::TimedOut, _) => Settle::Retry(
            format!("timeout: timed out after {:?}", timeout.unwrap_or_default()),
            None,
        ),
        (Interrupt::None, Outcome::Returned(Ok(()))) => Settle::Consume,
        (Interrupt::None, Outcome::Returned(Err(e))) => match e.kind() {
            HandlerErrorKind::Fatal => Settle::Trash(format!("fatal: {}", e.message())),
            HandlerErrorKind::Retry { after } => Settle::Retry(format!("error: {}", e.message()), *after),
        },
        (Interrupt::None, Outcome::Panicked(message)) => Settle::Retry(format!("panicked: {message}"), None),
        (Interrupt::None, Outcome::Cancelled) => Settle::Release,
        (Interrupt::None, Outcome::NoHandler) => Settle::Retry(format!("no-handler: {}", no_handler()), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Option<Duration> = Some(Duration::from_secs(60));

    fn run(interrupt: Interrupt, outcome: Outcome) -> Settle {
        decide(interrupt, outcome, MINUTE, || "none here".to_owned())
    }

    #[test]
    fn a_handler_that_ran_to_its_end_decides() {
        let ok = || Outcome::Returned(Ok(()));
        assert_eq!(run(Interrupt::None, ok()), Settle::Consume);
        let fatal = Outcome::Returned(Err(HandlerError::fatal("bad input")));
        assert_eq!(
            run(Interrupt::None, fatal),
            Settle::Trash("fatal: bad input".into())
        );
        let later = HandlerError::retry_msg("busy").after(Duration::from_secs(5));
        assert_eq!(
            run(Interrupt::None, Outcome::Returned(Err(later))),
            Settle::Retry("error: busy".into(), Some(Duration::from_secs(5)))
        );
        let backoff = Outcome::Returned(Err(HandlerError::retry_msg("flaky")));
        assert_eq!(
            run(Interrupt::None, backoff),
            Settle::Retry("error: flaky".into(), None)
        );
        assert_eq!(
            run(Interrupt::None, Outcome::Panicked("boom".into())),
            Settle::Retry("panicked: boom".into(), None)
        );
        assert_eq!(
            run(Interrupt::None, Outcome::NoHandler),
            Settle::Retry("no-handler: none here".into(), None)
        );
        // Aborted without an interrupt of ours (the runtime shut down).
        assert_eq!(run(Interrupt::None, Outcome::Cancelled), Settle::Release);
    }

    #[test]
    fn an_interrupt_outranks_what_the_handler_returned() {
        for outcome in [Outcome::Returned(Ok(())), Outcome::Cancelled] {
            assert_eq!(
                run(Interrupt::LeaseLost, outcome),
                Settle::Drop(Interrupt::LeaseLost)
            );
        }
        for interrupt in [Interrupt::Cancelled, Interrupt::Released] {
            assert_eq!(run(interrupt, Outcome::Returned(Ok(()))), Settle::Drop(interrupt));
        }
        assert_eq!(
            run(Interrupt::TimedOut, Outcome::Returned(Ok(()))),
            Settle::Retry("timeout: timed out after 60s".into(), None)
        );
    }
}
