//! A held claim ([`Lease`]) and a settle verb that did not take
//! ([`Unsettled`]).
//!
//! A lease has one owner: `consume`, `abandon` and `trash` take it by value,
//! so the same lease cannot be settled twice by mistake (the compiler says
//! so); `extend` borrows it. A verb that fails before the board changed (the
//! connection dropped) hands the lease back in its error, to try again.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::time::Instant;

use crate::error::Error;
use crate::job::JobId;

/// A held claim: the owner string on the job plus the fencing token.
///
/// The token grows with every claim of the job; a verb given a lease whose
/// owner or token no longer matches is refused with
/// [`Error::is_not_owner`]. A lease is not `Clone`: settle it once, with
/// [`Board::consume`](crate::Board::consume),
/// [`abandon`](crate::Board::abandon) or [`trash`](crate::Board::trash).
#[derive(Debug)]
#[must_use = "a lease is settled with consume, abandon or trash; a dropped lease leaves its job claimed until the expiry passes"]
pub struct Lease {
    queue: String,
    job: JobId,
    owner: String,
    token: u64,
    /// A time of this process' clock the lease surely began after, when
    /// the board knows one (a hand-off: the registering claim's sending).
    /// Only a worker (the `cli` feature) reads it.
    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    began_after: Option<Instant>,
}

/// Two leases are the same claim: queue, job, owner and token.
impl PartialEq for Lease {
    fn eq(&self, other: &Self) -> bool {
        (&self.queue, &self.job, &self.owner, self.token)
            == (&other.queue, &other.job, &other.owner, other.token)
    }
}

impl Eq for Lease {}

impl Hash for Lease {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (&self.queue, &self.job, &self.owner, self.token).hash(state);
    }
}

impl Lease {
    /// Builds a lease from its parts: for a claim made elsewhere (another
    /// process, the CLI's `--owner`/`--token`, a claim by taskflow, whose
    /// token is 0). Token 0 skips the fencing check: any claim by `owner`
    /// matches.
    pub fn new(queue: impl Into<String>, job: JobId, owner: impl Into<String>, token: u64) -> Self {
        Lease {
            queue: queue.into(),
            job,
            owner: owner.into(),
            token,
            began_after: None,
        }
    }

    /// The lease, known to have begun after `at` (this process' clock).
    pub(crate) fn began_after(self, at: Instant) -> Lease {
        Lease {
            began_after: Some(at),
            ..self
        }
    }

    /// A time of this process' clock the lease surely began after, when
    /// known.
    #[cfg_attr(not(feature = "cli"), allow(dead_code))]
    pub(crate) fn began(&self) -> Option<Instant> {
        self.began_after
    }

    /// The queue the job is on.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// The job.
    pub fn job(&self) -> &JobId {
        &self.job
    }

    /// The owner string written to the job's owner key.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The fencing token of this claim (0 for a claim made by taskflow).
    pub fn token(&self) -> u64 {
        self.token
    }

    /// A second handle on the same claim, for the parts of a worker that
    /// only read or extend it (the heartbeat, the handler's context); the
    /// worker's settle step keeps the one it settles.
    pub(crate) fn extend_handle(&self) -> Lease {
        Lease::new(
            self.queue.clone(),
            self.job.clone(),
            self.owner.clone(),
            self.token,
        )
    }
}

/// A settle verb (consume, abandon, trash) that did not take: why, and the
/// lease back when it may still be held (the board was not reached, or
/// answered with something other than "the lease is over"), so the caller
/// can try again.
///
/// It reads as the [`Error`] it carries (`unsettled.is_not_owner()`), and
/// `?` turns it into one.
#[derive(Debug, PartialEq, Eq)]
pub struct Unsettled {
    error: Error,
    // Boxed: a settle verb's `Result` stays small.
    lease: Option<Box<Lease>>,
}

impl Unsettled {
    /// The verb failed with `error`; the lease comes back unless the error
    /// says the lease is over (not owner, not found, cancelled, finished).
    pub fn new(error: Error, lease: Lease) -> Self {
        let over = error.is_lease_over() || error.is_finished();
        Unsettled {
            lease: (!over).then(|| Box::new(lease)),
            error,
        }
    }

    /// Why the verb did not take.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The lease, when it may still be held: settle it again with it.
    pub fn into_lease(self) -> Option<Lease> {
        self.lease.map(|l| *l)
    }
}

impl Deref for Unsettled {
    type Target = Error;

    fn deref(&self) -> &Error {
        &self.error
    }
}

impl fmt::Display for Unsettled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for Unsettled {}

impl From<Unsettled> for Error {
    fn from(u: Unsettled) -> Error {
        u.error
    }
}

/// What a settle verb returns: done, or [`Unsettled`].
pub type SettleResult<T = ()> = std::result::Result<T, Unsettled>;

/// A settle verb's result on `lease`: its error becomes an [`Unsettled`]
/// carrying the lease back.
pub(crate) fn lease_back<T>(result: crate::Result<T>, lease: Lease) -> SettleResult<T> {
    result.map_err(|e| Unsettled::new(e, lease))
}

/// A batch settle's results on `leases`, in order: each error carries its
/// lease back, and when the whole batch failed (`Err`) every lease comes
/// back with that error.
pub(crate) fn leases_back(
    results: crate::Result<Vec<crate::Result<()>>>,
    leases: Vec<Lease>,
) -> Vec<SettleResult> {
    match results {
        Ok(results) => results
            .into_iter()
            .zip(leases)
            .map(|(r, l)| lease_back(r, l))
            .collect(),
        Err(e) => leases
            .into_iter()
            .map(|l| Err(Unsettled::new(e.clone(), l)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        Lease::new("q", JobId::from("j"), "me", 3)
    }

    #[test]
    fn a_lease_comes_back_only_while_it_may_still_be_held() {
        let back = Unsettled::new(Error::unavailable("connection reset"), lease());
        assert!(back.is_unavailable());
        assert_eq!(back.into_lease(), Some(lease()));
        for over in [
            Error::not_owner("q", "j", "me", None),
            Error::not_found("q", "j"),
            Error::cancelled("q", "j"),
            Error::finished("q", "j", "completed"),
        ] {
            let u = Unsettled::new(over, lease());
            assert_eq!(u.into_lease(), None);
        }
    }

    #[test]
    fn an_unsettled_verb_reads_as_its_error() {
        let u = Unsettled::new(Error::not_owner("q", "j", "me", Some("them")), lease());
        assert!(u.is_not_owner());
        assert_eq!(u.to_string(), u.error().to_string());
        let e: Error = u.into();
        assert!(e.is_not_owner());
    }
}
