//! What a running handler knows about its job.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

use crate::board::AnyBoard;
use crate::codec::Book;
use crate::job::{Claimed, JobId, Lease, NewJob};

/// A one-way flag that tells a handler to stop (lease lost, timeout,
/// cancellation, shutdown).
#[derive(Debug, Default, Clone)]
pub struct CancelFlag {
    inner: Arc<(AtomicBool, Notify)>,
}

impl CancelFlag {
    /// Raises the flag and wakes every waiter.
    pub fn cancel(&self) {
        self.inner.0.store(true, Ordering::SeqCst);
        self.inner.1.notify_waiters();
    }

    /// True once raised.
    pub fn is_cancelled(&self) -> bool {
        self.inner.0.load(Ordering::SeqCst)
    }

    /// Resolves once raised.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.inner.1.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// Why a pipeline's next step to `next_queue` cannot be posted from a job
/// of `own_queue` (see [`JobContext::complete_into`]): the reason to trash
/// the job with, `None` when it can.
#[cfg(any(feature = "cli", feature = "testing"))]
pub(crate) fn own_queue_step(own_queue: &str, next_queue: &str) -> Option<String> {
    (own_queue == next_queue).then(|| {
        format!(
            "fatal: complete_into names the job's own queue {own_queue}: the next step would be this \
             very job (post a new job with JobContext::board instead)"
        )
    })
}

/// The context a handler runs with: its job, its lease, its sandbox
/// directory and a cancellation flag. Cheap to clone.
#[derive(Debug, Clone)]
pub struct JobContext {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    lease: Lease,
    name: String,
    attempt: u32,
    max_attempts: u32,
    details: rmpv::Value,
    book: Option<Book>,
    sandbox: PathBuf,
    cancel: CancelFlag,
    /// `None` only in a context made for a test without a board.
    board: Option<AnyBoard>,
    next: std::sync::Mutex<Option<(String, NewJob)>>,
}

impl JobContext {
    /// Builds the context of a claimed job (the worker does this; tests may
    /// too).
    pub fn new(claimed: &Claimed, sandbox: PathBuf, cancel: CancelFlag, board: AnyBoard) -> Self {
        Self::detached(claimed, sandbox, cancel, Some(board))
    }

    /// A context whose board may be missing ([`crate::testing::InlineJob`]).
    pub(crate) fn detached(
        claimed: &Claimed,
        sandbox: PathBuf,
        cancel: CancelFlag,
        board: Option<AnyBoard>,
    ) -> Self {
        JobContext {
            inner: Arc::new(Inner {
                lease: claimed.lease.extend_handle(),
                name: claimed.name.clone(),
                attempt: claimed.attempt,
                max_attempts: claimed.max_attempts,
                details: claimed.details.clone(),
                book: claimed.book.clone(),
                sandbox,
                cancel,
                board,
                next: std::sync::Mutex::new(None),
            }),
        }
    }

    /// The job id.
    pub fn id(&self) -> &JobId {
        self.inner.lease.job()
    }

    /// The queue the job came from.
    pub fn queue(&self) -> &str {
        self.inner.lease.queue()
    }

    /// The job name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Which try this is, from 1.
    pub fn attempt(&self) -> u32 {
        self.inner.attempt
    }

    /// Tries allowed before the job is trashed.
    pub fn max_attempts(&self) -> u32 {
        self.inner.max_attempts
    }

    /// taskflow's whole `details` map of the job: `{"args": …}` for a job
    /// jobworker posted; for a job taskflow posted, everything it put there
    /// (the handler's arguments are `details["args"]` when present, else
    /// the whole map).
    pub fn details(&self) -> &rmpv::Value {
        &self.inner.details
    }

    /// taskflow's logbook reference of the job, when it has one.
    pub fn book(&self) -> Option<&Book> {
        self.inner.book.as_ref()
    }

    /// The fencing token of this claim: pass it to external systems so they
    /// can refuse writes from a worker whose lease was taken over.
    pub fn fencing_token(&self) -> u64 {
        self.inner.lease.token()
    }

    /// The lease this job runs under.
    pub fn lease(&self) -> &Lease {
        &self.inner.lease
    }

    /// The job's private sandbox directory (mode 0700, emptied before and
    /// after every job).
    pub fn sandbox(&self) -> &Path {
        &self.inner.sandbox
    }

    /// True once the worker asked the handler to stop.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Resolves once the worker asks the handler to stop.
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await
    }

    /// The job's cancellation flag (raised to stop the handler).
    #[cfg(feature = "testing")]
    pub(crate) fn cancel_flag(&self) -> &CancelFlag {
        &self.inner.cancel
    }

    /// The board, to post follow-up jobs.
    ///
    /// # Panics
    ///
    /// In a context made by [`crate::testing::InlineJob`] without a board
    /// (give it one with `InlineJob::board`); a worker's context always
    /// has one.
    pub fn board(&self) -> &AnyBoard {
        match &self.inner.board {
            Some(board) => board,
            None => panic!(
                "job {} runs inline without a board: give it one with InlineJob::board",
                self.id()
            ),
        }
    }

    /// Makes this job a pipeline step: when the handler succeeds, `job` is
    /// posted to `queue` (under this job's id) before this job is consumed,
    /// once even if this job runs again. A later call replaces an earlier
    /// one; a failing handler posts nothing. `queue` must be another queue
    /// than the job's own (there the next step would be this very job):
    /// such a job is trashed, saying so; post a new job with
    /// [`board`](Self::board) instead.
    ///
    /// ```
    /// use jobworker::{HandlerError, JobContext, NewJob};
    ///
    /// /// Step one of two: download, then move on to queue `transcode`.
    /// #[jobworker::handler(queue = "downloads")]
    /// async fn download(cx: JobContext, url: String) -> Result<(), HandlerError> {
    ///     let file = cx.sandbox().join("video");
    ///     std::fs::write(&file, url.as_bytes())?; // (a real download here)
    ///     cx.complete_into("transcode", NewJob::new("transcode").args(&url)?);
    ///     Ok(())
    /// }
    /// # fn main() {}
    /// ```
    pub fn complete_into(&self, queue: impl Into<String>, job: NewJob) {
        if let Ok(mut next) = self.inner.next.lock() {
            *next = Some((queue.into(), job));
        }
    }

    /// Whether a next step was set with [`complete_into`](Self::complete_into).
    #[cfg(feature = "cli")]
    pub(crate) fn has_next(&self) -> bool {
        self.inner.next.lock().is_ok_and(|n| n.is_some())
    }

    /// The next step set with [`complete_into`](Self::complete_into)
    /// (the worker's settle step takes it).
    #[cfg(any(feature = "cli", feature = "testing"))]
    pub(crate) fn take_next(&self) -> Option<(String, NewJob)> {
        self.inner.next.lock().ok()?.take()
    }

    /// Logs a line about this job (with job id, queue and name fields).
    pub fn log(&self, message: &str) {
        tracing::info!(job = %self.id(), queue = self.queue(), name = self.name(), "{message}");
    }
}
