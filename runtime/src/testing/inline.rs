//! Running one handler inline, as a worker would, without a board or a
//! worker process: the handler registered for the job's name runs on the
//! caller's runtime with a context of the test's choosing, and its outcome
//! says what a worker would do with the job.

use std::path::PathBuf;
use std::time::Duration;

use futures_util::FutureExt;

use crate::board::AnyBoard;
use crate::codec::{args_of, details_of};
use crate::error::{Error, Result};
use crate::handler::{
    panic_text, CancelFlag, HandlerEntry, HandlerErrorKind, HandlerFn, JobContext, Registry,
};
use crate::job::{Claimed, JobId, Lease, NewJob, Priority};

/// What a handler's run came to, and so what a worker would do with its
/// job. The reasons start as the worker's do (`error:`, `fatal:`,
/// `panicked:`, `timeout:`), which name the failure group of a trashed job.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The handler returned `Ok`: the job is consumed (after posting the
    /// next step, when the handler set one with
    /// [`JobContext::complete_into`]).
    Consumed {
        /// The next step: its queue and job.
        next: Option<(String, Box<NewJob>)>,
    },
    /// The handler failed with a retryable error (`?` on any error, or
    /// [`HandlerError::retry_msg`](crate::HandlerError::retry_msg)), panicked
    /// or ran past its timeout: an attempt is counted and the job runs again
    /// after `after` (or the worker's backoff when `None`). On its last
    /// attempt the job is trashed instead ([`InlineJob::run`] says
    /// `Trashed`, the reason ending with `(attempts exhausted: N of N)`).
    Retried {
        /// The reason recorded on the job.
        reason: String,
        /// The delay the handler asked for.
        after: Option<Duration>,
    },
    /// The handler gave up ([`HandlerError::fatal`](crate::HandlerError::fatal)):
    /// the job is trashed.
    Trashed {
        /// The reason recorded on the job.
        reason: String,
    },
}

impl Outcome {
    /// True for [`Outcome::Consumed`].
    pub fn is_consumed(&self) -> bool {
        matches!(self, Outcome::Consumed { .. })
    }

    /// The reason of a retry or a trash (`None` when consumed).
    pub fn reason(&self) -> Option<&str> {
        match self {
            Outcome::Consumed { .. } => None,
            Outcome::Retried { reason, .. } | Outcome::Trashed { reason } => Some(reason),
        }
    }
}

/// One job run inline: the handler registered for its name (linked into the
/// test binary with `#[jobworker::handler]`), called with a context the
/// test chooses: which attempt this is, a cancellation flag it may raise,
/// a sandbox directory (a fresh temporary one by default, removed after
/// the run) and, for handlers that post follow-up jobs, a board.
///
/// ```
/// use jobworker::testing::{InlineJob, Outcome};
/// use jobworker::{HandlerError, JobContext, NewJob};
///
/// #[jobworker::handler]
/// async fn greet(cx: JobContext, name: String) -> Result<(), HandlerError> {
///     if name.is_empty() {
///         return Err(HandlerError::fatal("no name"));
///     }
///     std::fs::write(cx.sandbox().join("greeting.txt"), format!("hello {name}"))?;
///     Ok(())
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> jobworker::Result<()> {
/// let outcome = InlineJob::new(greet::job(&"Ada".to_owned())?).run().await?;
/// assert!(outcome.is_consumed());
/// let outcome = InlineJob::new(NewJob::new("greet").args(&"")?).attempt(2).run().await?;
/// assert_eq!(outcome, Outcome::Trashed { reason: "fatal: no name".into() });
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct InlineJob {
    job: NewJob,
    queue: String,
    attempt: u32,
    cancel: CancelFlag,
    sandbox: Option<PathBuf>,
    board: Option<AnyBoard>,
}

impl InlineJob {
    /// `job` (its name selects the handler; its arguments, id and
    /// `max_attempts` are the context's), on its first attempt, in queue
    /// `default`.
    pub fn new(job: NewJob) -> InlineJob {
        InlineJob {
            job,
            queue: "default".to_owned(),
            attempt: 1,
            cancel: CancelFlag::default(),
            sandbox: None,
            board: None,
        }
    }

    /// The queue the context names.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }

    /// Which try this is, from 1.
    pub fn attempt(mut self, attempt: u32) -> Self {
        self.attempt = attempt.max(1);
        self
    }

    /// The sandbox directory (kept after the run; by default a fresh
    /// temporary directory, removed after the run).
    pub fn sandbox(mut self, dir: impl Into<PathBuf>) -> Self {
        self.sandbox = Some(dir.into());
        self
    }

    /// The board [`JobContext::board`] gives the handler. Without one, a
    /// handler that asks for the board panics (and the outcome says so).
    pub fn board(mut self, board: impl Into<AnyBoard>) -> Self {
        self.board = Some(board.into());
        self
    }

    /// The job's cancellation flag: raise it (before or during the run) to
    /// test how the handler stops.
    pub fn cancel_flag(&self) -> CancelFlag {
        self.cancel.clone()
    }

    /// Runs the handler to its end and says what a worker would do with the
    /// job. Errors only when no handler of the job's name is linked in, or
    /// the sandbox cannot be made.
    pub async fn run(self) -> Result<Outcome> {
        let entry = handler_for(&Registry::load()?, &self.job.name)?;
        let temp;
        let sandbox = match &self.sandbox {
            Some(dir) => dir.clone(),
            None => {
                temp = tempfile::Builder::new()
                    .prefix("jobworker-sandbox-")
                    .tempdir()
                    .map_err(|e| Error::io("cannot make a sandbox directory", e))?;
                temp.path().to_owned()
            }
        };
        let claimed = self.claimed(self.job.max_attempts);
        let cx = JobContext::detached(&claimed, sandbox, self.cancel.clone(), self.board.clone());
        Ok(match run_handler(&entry, claimed.args, cx).await {
            // The last try: the board trashes the job instead.
            Outcome::Retried { reason, .. } if self.attempt >= self.job.max_attempts => Outcome::Trashed {
                reason: format!(
                    "{reason} (attempts exhausted: {} of {})",
                    self.attempt, self.job.max_attempts
                ),
            },
            outcome => outcome,
        })
    }

    /// The claim a worker would have made of the job.
    fn claimed(&self, max_attempts: u32) -> Claimed {
        let id = self.job.id.clone().unwrap_or_else(JobId::random);
        let details = details_of(&self.job.args);
        Claimed {
            lease: Lease::new(self.queue.clone(), id, "jobworker-testing", 0),
            name: self.job.name.clone(),
            args: args_of(&details),
            details,
            book: self.job.book.clone(),
            attempt: self.attempt,
            max_attempts,
            priority: Priority(self.job.priority.0),
            suspect: false,
        }
    }
}

/// The handler of job name `name`; an error naming the handlers linked in
/// when there is none.
pub(super) fn handler_for(registry: &Registry, name: &str) -> Result<HandlerEntry> {
    registry.get(name).copied().ok_or_else(|| {
        let linked: Vec<&str> = registry.iter().map(|e| e.name).collect();
        Error::invalid(format!(
            "no handler named {name:?} is linked into this test binary (handlers: {})",
            linked.join(", ")
        ))
    })
}

/// Runs `entry`'s handler with `args` in context `cx` to its end (or its
/// timeout, which raises the context's cancellation flag) and says what a
/// worker would do with the job.
pub(super) async fn run_handler(entry: &HandlerEntry, args: rmpv::Value, cx: JobContext) -> Outcome {
    let run = call(entry.run, cx.clone(), args);
    let ended = match entry.timeout {
        Some(limit) => match tokio::time::timeout(limit, run).await {
            Ok(ended) => ended,
            Err(_) => {
                cx.cancel_flag().cancel();
                return Outcome::Retried {
                    reason: format!("timeout: timed out after {limit:?}"),
                    after: None,
                };
            }
        },
        None => run.await,
    };
    match ended {
        Ok(Ok(())) => Outcome::Consumed {
            next: cx.take_next().map(|(queue, job)| (queue, Box::new(job))),
        },
        Ok(Err(e)) => match e.kind() {
            HandlerErrorKind::Fatal => Outcome::Trashed {
                reason: format!("fatal: {}", e.message()),
            },
            HandlerErrorKind::Retry { after } => Outcome::Retried {
                reason: format!("error: {}", e.message()),
                after: *after,
            },
        },
        Err(panic) => Outcome::Retried {
            reason: format!("panicked: {panic}"),
            after: None,
        },
    }
}

/// Calls a handler; `Err` carries a panic's message.
async fn call(
    run: HandlerFn,
    cx: JobContext,
    args: rmpv::Value,
) -> std::result::Result<std::result::Result<(), crate::HandlerError>, String> {
    match run {
        HandlerFn::Async(f) | HandlerFn::StartOnLoop(f) => {
            std::panic::AssertUnwindSafe(async move { f(cx, args).await })
                .catch_unwind()
                .await
                .map_err(panic_text)
        }
        HandlerFn::Blocking(f) => tokio::task::spawn_blocking(move || f(cx, args))
            .await
            .map_err(|e| match e.try_into_panic() {
                Ok(payload) => panic_text(payload),
                Err(e) => e.to_string(),
            }),
    }
}
