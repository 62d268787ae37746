//! The one error type of the crate, with kind predicates.
//!
//! Messages are lowercase and name the job id and queue where there is one,
//! so that a log line or a CLI error is enough to find the job again.

use std::fmt;

/// What went wrong, in the terms of the board contract.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The job (or queue entry) does not exist on the board.
    NotFound,
    /// The job is claimed by someone else; `owner` is the current owner.
    AlreadyClaimed {
        /// Owner string of the claim that is in the way.
        owner: String,
    },
    /// The lease is no longer held: it expired, or another claim replaced it.
    NotOwner {
        /// Owner string currently on the job, if any.
        owner: Option<String>,
    },
    /// The server cannot be reached, refused us, or is too old.
    Unavailable,
    /// A posting or value could not be encoded or decoded.
    Codec,
    /// A job with this id is already on the board.
    Exists,
    /// The job has already finished (completed, trashed or cancelled), so
    /// the verb no longer applies.
    Finished,
    /// The job was cancelled: a lease on it is over, and its handler must
    /// stop (a verb given a lease on a cancelled job says so with this kind,
    /// not [`ErrorKind::NotFound`] or [`ErrorKind::NotOwner`]).
    Cancelled,
    /// The caller passed something invalid (bad queue name, bad priority, …).
    Invalid,
    /// A feature this backend does not offer.
    Unsupported,
    /// An I/O error outside the board (sandbox, embedded server, files).
    Io,
}

/// The crate's error: a kind plus a lowercase message naming job and queue.
///
/// Callers branch on the kind predicates, never on the message:
///
/// ```
/// # use jobworker::embedded::{RedisServer, ServerOptions};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> jobworker::Result<()> {
/// # let server = RedisServer::start(ServerOptions::default())?;
/// # let board = jobworker::redis::RedisBoard::connect(&server.url()).await?;
/// use jobworker::{Board, JobId};
///
/// let e = board.state("emails", &JobId::from("no-such-job")).await.unwrap_err();
/// assert!(e.is_not_found());
/// assert!(e.to_string().contains("no-such-job") && e.to_string().contains("emails"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Builds an error of `kind` with `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// `job` in `queue` does not exist.
    pub fn not_found(queue: &str, job: &str) -> Self {
        Self::new(
            ErrorKind::NotFound,
            format!("job {job} not found in queue {queue}"),
        )
    }

    /// No recurring job (template) `id` in `queue`.
    pub fn recurring_not_found(queue: &str, id: &str) -> Self {
        Self::new(
            ErrorKind::NotFound,
            format!("no recurring job {id} in queue {queue}"),
        )
    }

    /// `job` in `queue` is claimed by `owner`.
    pub fn already_claimed(queue: &str, job: &str, owner: &str) -> Self {
        Self::new(
            ErrorKind::AlreadyClaimed {
                owner: owner.to_owned(),
            },
            format!("job {job} in queue {queue} is already claimed by {owner}"),
        )
    }

    /// The lease on `job` held as `who` is gone; `owner` is who holds it
    /// now (`who` itself when the fencing token did not match: the job was
    /// claimed again since, by the same owner).
    pub fn not_owner(queue: &str, job: &str, who: &str, owner: Option<&str>) -> Self {
        let message = match owner {
            Some(o) if o == who => format!(
                "lease on job {job} in queue {queue} is stale: {who} claimed it again since \
                 (its fencing token is not the one given)"
            ),
            Some(o) => {
                format!("lease on job {job} in queue {queue} is not held by {who} (it is owned by {o})")
            }
            None => format!("lease on job {job} in queue {queue} is not held by {who} (it has no owner)"),
        };
        Self::new(
            ErrorKind::NotOwner {
                owner: owner.map(str::to_owned),
            },
            message,
        )
    }

    /// `job` in `queue` has already finished: it is `state`.
    pub fn finished(queue: &str, job: &str, state: &str) -> Self {
        Self::new(
            ErrorKind::Finished,
            format!("job {job} in queue {queue} is already {state}"),
        )
    }

    /// `job` in `queue` was cancelled (a lease on it is over).
    pub fn cancelled(queue: &str, job: &str) -> Self {
        Self::new(
            ErrorKind::Cancelled,
            format!("job {job} in queue {queue} was cancelled"),
        )
    }

    /// The server is unreachable or unusable.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// A codec failure.
    pub fn codec(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Codec, message)
    }

    /// Invalid input from the caller.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }

    /// A feature the backend does not support.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }

    /// An I/O failure with context.
    pub fn io(context: &str, err: std::io::Error) -> Self {
        Self::new(ErrorKind::Io, format!("{context}: {err}"))
    }

    /// The kind of this error.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// True when the job does not exist.
    pub fn is_not_found(&self) -> bool {
        self.kind == ErrorKind::NotFound
    }

    /// True when someone else holds the claim.
    pub fn is_already_claimed(&self) -> bool {
        matches!(self.kind, ErrorKind::AlreadyClaimed { .. })
    }

    /// True when the caller's lease is stale.
    pub fn is_not_owner(&self) -> bool {
        matches!(self.kind, ErrorKind::NotOwner { .. })
    }

    /// True when the server is unreachable or unusable.
    pub fn is_unavailable(&self) -> bool {
        self.kind == ErrorKind::Unavailable
    }

    /// True for encode/decode failures.
    pub fn is_codec(&self) -> bool {
        self.kind == ErrorKind::Codec
    }

    /// True when a job with the posted id is already on the board.
    pub fn is_exists(&self) -> bool {
        self.kind == ErrorKind::Exists
    }

    /// True when the job has already finished.
    pub fn is_finished(&self) -> bool {
        self.kind == ErrorKind::Finished
    }

    /// True when the job was cancelled (a lease on it is over).
    pub fn is_cancelled(&self) -> bool {
        self.kind == ErrorKind::Cancelled
    }

    /// True when a lease verb was refused because the lease is over: not
    /// held ([`is_not_owner`](Error::is_not_owner)), the job gone
    /// ([`is_not_found`](Error::is_not_found)) or cancelled
    /// ([`is_cancelled`](Error::is_cancelled)). A worker stops the handler
    /// and drops its result.
    pub fn is_lease_over(&self) -> bool {
        self.is_not_owner() || self.is_not_found() || self.is_cancelled()
    }

    /// True for invalid caller input.
    pub fn is_invalid(&self) -> bool {
        self.kind == ErrorKind::Invalid
    }

    /// True when the backend does not support the feature.
    pub fn is_unsupported(&self) -> bool {
        self.kind == ErrorKind::Unsupported
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<redis::RedisError> for Error {
    fn from(err: redis::RedisError) -> Self {
        if err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_unrecoverable_error()
            || err.is_timeout()
        {
            Error::unavailable(format!("redis unavailable: {err}"))
        } else {
            Error::new(ErrorKind::Unavailable, format!("redis error: {err}"))
        }
    }
}
