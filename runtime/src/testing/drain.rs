//! Draining queues in the test's own process: claim, run the registered
//! handler, settle, until nothing is claimable; no worker process.

use std::time::Duration;

use crate::board::{AnyBoard, Board};
use crate::error::{Error, Result};
use crate::handler::{own_queue_step, CancelFlag, JobContext, Registry};
use crate::job::{Abandon, Claimed, JobState};
use crate::testing::inline::{handler_for, run_handler, Outcome};

/// The owner string of the drain's leases.
const WHO: &str = "jobworker-testing";
/// The lease of each claim: a handler under test that runs longer than
/// this loses its job to the next claim.
const LEASE: Duration = Duration::from_secs(300);
/// Jobs claimed at once (run one after another).
const BATCH: usize = 16;
/// Claims before the drain gives up (a job that never stops failing
/// within its attempts, or one that posts itself again and again).
const MAX_CLAIMS: usize = 10_000;

/// What [`run_until_empty`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drained {
    /// Handler runs that returned `Ok` (their jobs consumed).
    pub consumed: usize,
    /// Failed runs whose job was given back for another try.
    pub retried: usize,
    /// Jobs trashed: fatal errors, and failures with no attempt left.
    pub trashed: usize,
}

/// Runs the jobs of `queues` in this process until none is claimable:
/// each claimed job runs its registered handler (the test binary's
/// `#[jobworker::handler]`s) with a fresh sandbox and the board as its
/// [`JobContext::board`], and is settled as a worker would settle it:
/// consumed (after posting its next step), trashed, or given back with an
/// attempt counted. A retry runs again at once, without the backoff or the
/// handler's delay, so the drain runs every job to its end; jobs scheduled
/// later (posted with a delay) and jobs waiting for dependencies that
/// never finish stay on the board.
///
/// Errors when a claimed job has no handler linked in (the job is given
/// back first), or when the queues are still not empty after 10,000
/// claims.
///
/// ```
/// use jobworker::testing::{run_until_empty, Drained, TestBoard};
/// use jobworker::{Board, HandlerError, JobContext, NewJob};
///
/// #[jobworker::handler(queue = "numbers", max_attempts = 2)]
/// async fn halve(cx: JobContext, n: u32) -> Result<(), HandlerError> {
///     if n == 1 {
///         return Ok(());
///     }
///     if n % 2 == 1 {
///         return Err(HandlerError::retry_msg(format!("{n} is odd")));
///     }
///     // A follow-up job, on the same board.
///     halve::post(cx.board(), &(n / 2)).await?;
///     Ok(())
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> jobworker::Result<()> {
/// let test = TestBoard::start().await?;
/// halve::post(test.board(), &8).await?;
/// halve::post(test.board(), &3).await?;
/// let drained = run_until_empty(test.any(), &["numbers"]).await?;
/// // 8, 4, 2 and 1 consumed; 3 failed twice and was trashed.
/// assert_eq!(drained, Drained { consumed: 4, retried: 1, trashed: 1 });
/// assert_eq!(test.board().job_count("numbers").await?, 0);
/// # Ok(())
/// # }
/// ```
pub async fn run_until_empty(board: impl Into<AnyBoard>, queues: &[&str]) -> Result<Drained> {
    let board = board.into();
    let registry = Registry::load()?;
    let mut drained = Drained::default();
    for _ in 0..MAX_CLAIMS {
        let claimed = board.claim(queues, WHO, LEASE, BATCH).await?;
        if claimed.is_empty() {
            return Ok(drained);
        }
        let mut claimed = claimed.into_iter();
        while let Some(job) = claimed.next() {
            if let Err(e) = run_one(&board, &registry, job, &mut drained).await {
                // Give back what this round still holds.
                for rest in claimed {
                    let _ = board.abandon(rest.lease, Abandon::Release).await;
                }
                return Err(e);
            }
        }
    }
    Err(Error::invalid(format!(
        "queues {} are still not empty after {MAX_CLAIMS} claims: does a job fail forever, or post \
         itself again and again?",
        queues.join(", ")
    )))
}

/// Runs one claimed job and settles it.
async fn run_one(board: &AnyBoard, registry: &Registry, job: Claimed, drained: &mut Drained) -> Result<()> {
    let entry = match handler_for(registry, &job.name) {
        Ok(entry) => entry,
        Err(e) => {
            let _ = board.abandon(job.lease, Abandon::Release).await;
            return Err(e);
        }
    };
    let sandbox = tempfile::Builder::new()
        .prefix("jobworker-sandbox-")
        .tempdir()
        .map_err(|e| Error::io("cannot make a sandbox directory", e))?;
    let cx = JobContext::new(
        &job,
        sandbox.path().to_owned(),
        CancelFlag::default(),
        board.clone(),
    );
    let retry = |reason: String| Abandon::Retry {
        delay: Duration::ZERO,
        error: reason,
    };
    match run_handler(&entry, job.args.clone(), cx).await {
        Outcome::Consumed { next } => {
            if let Some(why) = next
                .as_ref()
                .and_then(|(q, _)| own_queue_step(job.lease.queue(), q))
            {
                board.trash(job.lease, &why).await?;
                drained.trashed += 1;
                return Ok(());
            }
            if let Some((queue, next)) = next {
                match board.post(&queue, next.id(job.lease.job().clone())).await {
                    Ok(_) => {}
                    Err(e) if e.is_exists() => {}
                    Err(e) => return Err(e),
                }
            }
            board.consume(job.lease).await?;
            drained.consumed += 1;
        }
        Outcome::Retried { reason, .. } => {
            let state = board.abandon(job.lease, retry(reason)).await?;
            match state {
                JobState::Trashed => drained.trashed += 1,
                _ => drained.retried += 1,
            }
        }
        Outcome::Trashed { reason } => {
            board.trash(job.lease, &reason).await?;
            drained.trashed += 1;
        }
    }
    Ok(())
}
