//! The board contract: taskflow's job board (post, claim with expiry,
//! extend, consume, abandon, trash) plus leases with fencing tokens, which
//! every backend implements.

use std::future::Future;
use std::time::Duration;

use crate::board::{Lease, SettleResult, Unsettled};
use crate::error::Result;
use crate::job::{Abandon, Claimed, JobId, JobInfo, JobState, ListFilter, NewJob, Page};

/// What one [`Board::reap`] pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct ReapReport {
    /// Scheduled jobs that became ready.
    pub promoted: usize,
    /// Expired leases recovered (attempt counted).
    pub stalled: usize,
    /// Jobs posted by taskflow that were indexed.
    pub indexed: usize,
}

/// The job-board contract, implemented by every backend.
///
/// Every verb that takes a [`Lease`] refuses a stale one (expired, or
/// replaced by a newer claim) with an error for which
/// [`Error::is_not_owner`](crate::Error::is_not_owner) is true, and never
/// changes the job then.
pub trait Board: Sync {
    /// Posts a job; returns its id.
    fn post(&self, queue: &str, job: NewJob) -> impl Future<Output = Result<JobId>> + Send;

    /// Posts several jobs to `queue`, in few round trips where the backend
    /// can (each post is still its own); one result per job, in order.
    fn post_many(
        &self,
        queue: &str,
        jobs: &[NewJob],
    ) -> impl Future<Output = Result<Vec<Result<JobId>>>> + Send {
        async move {
            let posts = jobs.iter().map(|job| self.post(queue, job.clone()));
            Ok(futures_util::future::join_all(posts).await)
        }
    }

    /// Atomically claims up to `count` ready jobs for `who` with a lease of
    /// `expiry`, taking queues in the order given and, within a queue,
    /// higher priority first, then FIFO. Due scheduled jobs are promoted
    /// and expired leases recovered first.
    fn claim(
        &self,
        queues: &[&str],
        who: &str,
        expiry: Duration,
        count: usize,
    ) -> impl Future<Output = Result<Vec<Claimed>>> + Send {
        async move {
            let request = ClaimRequest {
                queues,
                who,
                expiry,
                count,
                holding: 0,
                hand_off: None,
            };
            self.claim_with(&request).await
        }
    }

    /// [`claim`](Board::claim) as `request` says, for a claimer that holds
    /// `request.holding` jobs now. A suspect (a job whose worker died while
    /// it held several, so the crash could not be blamed on one) is given
    /// only to a claimer holding none, as the only job of the claim
    /// ([`Claimed::suspect`]), so that a poison pill shows itself by
    /// crashing a worker alone.
    fn claim_with(&self, request: &ClaimRequest<'_>) -> impl Future<Output = Result<Vec<Claimed>>> + Send;

    /// Claims one named job (taskflow's claim), whatever its place in the
    /// order, with a lease of `expiry`, or (`None`, as taskflow allows) held
    /// until it is consumed, abandoned or trashed: on ZooKeeper, as long as
    /// the claiming session lives. Fails with `is_already_claimed` when
    /// someone holds it.
    fn claim_job(
        &self,
        queue: &str,
        job: &JobId,
        who: &str,
        expiry: Option<Duration>,
    ) -> impl Future<Output = Result<Claimed>> + Send;

    /// Extends a held lease to `expiry` from now (the heartbeat).
    fn extend(&self, lease: &Lease, expiry: Duration) -> impl Future<Output = Result<()>> + Send;

    /// The job is done: it leaves the board (kept in bounded history).
    fn consume(&self, lease: Lease) -> impl Future<Output = SettleResult> + Send;

    /// Consumes several jobs at once (one round trip where the backend can);
    /// one result per lease, in order. When the round trip fails, every
    /// lease comes back in its [`Unsettled`].
    fn consume_many(&self, leases: Vec<Lease>) -> impl Future<Output = Vec<SettleResult>> + Send {
        async move {
            let mut out = Vec::with_capacity(leases.len());
            for lease in leases {
                out.push(self.consume(lease).await);
            }
            out
        }
    }

    /// Consumes `done`, then claims like [`claim_with`](Board::claim_with)
    /// (`request.holding` counts the jobs still running, not `done`): a
    /// worker's settle-and-take step, in one round trip where the backend
    /// can. The consumes and the claim succeed or fail apart: a failed claim
    /// leaves the consumes recorded, and a consume that did not take hands
    /// its lease back.
    fn consume_then_claim(
        &self,
        done: Vec<Lease>,
        request: &ClaimRequest<'_>,
    ) -> impl Future<Output = (Vec<SettleResult>, Result<Vec<Claimed>>)> + Send {
        async move {
            if let Err(e) = request.validate() {
                let back = done
                    .into_iter()
                    .map(|l| Err(Unsettled::new(e.clone(), l)))
                    .collect();
                return (back, Err(e));
            }
            let consumed = self.consume_many(done).await;
            (consumed, self.claim_with(request).await)
        }
    }

    /// Gives the claim back; returns where the job went (ready, scheduled,
    /// or trashed when a counted retry used up its attempts).
    fn abandon(&self, lease: Lease, how: Abandon) -> impl Future<Output = SettleResult<JobState>> + Send;

    /// Gives the job up: it moves to the trash with `reason`.
    fn trash(&self, lease: Lease, reason: &str) -> impl Future<Output = SettleResult> + Send;

    /// The job's state; `is_not_found` when the board has no trace of it.
    fn state(&self, queue: &str, job: &JobId) -> impl Future<Output = Result<JobState>> + Send;

    /// Everything the board knows about one job.
    fn show(&self, queue: &str, job: &JobId) -> impl Future<Output = Result<JobInfo>> + Send;

    /// The current owner string of the job, if it is claimed.
    fn find_owner(&self, queue: &str, job: &JobId) -> impl Future<Output = Result<Option<String>>> + Send;

    /// A page of the queue's jobs.
    fn list(
        &self,
        queue: &str,
        filter: ListFilter,
        page: Page,
    ) -> impl Future<Output = Result<Vec<JobInfo>>> + Send;

    /// Jobs in the queue's listings (ready, scheduled and claimed), as
    /// taskflow counts them.
    fn job_count(&self, queue: &str) -> impl Future<Output = Result<usize>> + Send;

    /// Promotes due jobs, recovers expired leases and indexes jobs posted
    /// by taskflow, without claiming.
    fn reap(&self, queue: &str) -> impl Future<Output = Result<ReapReport>> + Send;

    /// Waits until one of `queues` may have claimable work, or `timeout`
    /// passes; returns whether work may be there. Wakes on posts without
    /// polling the server; also wakes when a scheduled job falls due or a
    /// lease expires.
    fn wait(&self, queues: &[&str], timeout: Duration) -> impl Future<Output = Result<bool>> + Send;

    /// [`wait`](Board::wait) for the claimer `who` (`None`: anyone), which
    /// may have registered for hand-offs ([`ClaimRequest::hand_off`]):
    /// also returns when a post hands it jobs, with those jobs. Their
    /// leases are `who`'s, not yet extended: start them, or give them back.
    fn wait_as(
        &self,
        queues: &[&str],
        who: Option<&str>,
        timeout: Duration,
    ) -> impl Future<Output = Result<Woken>> + Send {
        let _ = who;
        async move {
            Ok(Woken {
                work: self.wait(queues, timeout).await?,
                ..Woken::default()
            })
        }
    }

    /// Waits up to `timeout` only for jobs handed to `who` (see
    /// [`wait_as`](Board::wait_as)), for a claimer with no room: it gives
    /// them back at once instead of holding them unread.
    fn handed_to(
        &self,
        queues: &[&str],
        who: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<Claimed>>> + Send {
        let _ = (queues, who);
        async move {
            tokio::time::sleep(timeout).await;
            Ok(Vec::new())
        }
    }

    /// Ends `who`'s hand-off registrations on `queues` (a worker that
    /// stops taking work); returns the jobs handed to it and not yet
    /// returned by [`wait_as`](Board::wait_as), to start or give back.
    fn withdraw(&self, queues: &[&str], who: &str) -> impl Future<Output = Result<Vec<Claimed>>> + Send {
        let _ = (queues, who);
        async { Ok(Vec::new()) }
    }

    /// Gives back, without counting an attempt, every lease `who` still
    /// holds on `queues`, for a worker that exits on purpose after ending
    /// its registrations ([`withdraw`](Board::withdraw)) and settling
    /// every job it knew of: what is left are jobs handed to it that it
    /// never read (its loop was frozen), which did nothing to deserve an
    /// attempt or a crash counted. Returns how many went back. The
    /// default gives back nothing: a board that hands no jobs off leaves
    /// a worker no lease it does not know of.
    fn release_unread(&self, queues: &[&str], who: &str) -> impl Future<Output = Result<usize>> + Send {
        let _ = (queues, who);
        async { Ok(0) }
    }
}

/// What [`Board::wait_as`] saw.
#[derive(Debug, Default)]
pub struct Woken {
    /// Work may be claimable now (also true when jobs were handed).
    pub work: bool,
    /// Jobs posts handed to the waiter, leases taken.
    pub handed: Vec<Claimed>,
    /// The work was there when the wait began: it returned without
    /// waiting for anything. A claim that came back empty just before
    /// and comes back empty again after such a wake finds work that is
    /// not for this claimer (suspects, which go only to a claimer holding
    /// nothing): it should wait for its own jobs instead of asking again.
    pub at_once: bool,
}

/// What a claim asks for (see [`Board::claim_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimRequest<'a> {
    /// Queues to take from, in order.
    pub queues: &'a [&'a str],
    /// The owner the leases are written for.
    pub who: &'a str,
    /// Length of each lease.
    pub expiry: Duration,
    /// Most jobs to take (1 to [`MAX_CLAIM_COUNT`]).
    pub count: usize,
    /// Jobs the claimer holds now (a suspect goes only to one holding none).
    pub holding: usize,
    /// When the claim comes up empty, register the claimer for this long
    /// to be handed the next job posted to the queue (its lease taken by
    /// the post and sent to the claimer's [`Board::wait`]), so that its
    /// pickup needs no claim round trip. Only for a claim from one queue,
    /// on a board that can (Redis); elsewhere ignored.
    pub hand_off: Option<Duration>,
}

impl ClaimRequest<'_> {
    /// Checks the owner, expiry and count before any request is sent.
    pub fn validate(&self) -> Result<()> {
        validate_claim(self.who, self.expiry, self.count)
    }
}

/// Most jobs one claim may take (on every backend).
pub const MAX_CLAIM_COUNT: usize = 1000;

/// Checks the arguments of a claim (every backend); an expiry of `None`
/// (a claim held until released) passes.
pub(crate) fn validate_claim(who: &str, expiry: impl Into<Option<Duration>>, count: usize) -> Result<()> {
    if who.is_empty() {
        return Err(crate::Error::invalid("a claim needs a non-empty owner"));
    }
    if expiry.into().is_some_and(|e| e < Duration::from_millis(1)) {
        return Err(crate::Error::invalid("a claim needs an expiry of at least 1 ms"));
    }
    if count == 0 || count > MAX_CLAIM_COUNT {
        return Err(crate::Error::invalid(format!(
            "claim count must be 1 to {MAX_CLAIM_COUNT}, not {count}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_checked_before_any_request() {
        assert!(validate_claim("", Duration::from_secs(1), 1)
            .unwrap_err()
            .is_invalid());
        assert!(validate_claim("w", Duration::ZERO, 1).unwrap_err().is_invalid());
        assert!(validate_claim("w", Duration::from_secs(1), 0)
            .unwrap_err()
            .is_invalid());
        assert!(validate_claim("w", Duration::from_secs(1), MAX_CLAIM_COUNT + 1)
            .unwrap_err()
            .is_invalid());
        assert!(validate_claim("w", Duration::from_secs(1), MAX_CLAIM_COUNT).is_ok());
    }
}
