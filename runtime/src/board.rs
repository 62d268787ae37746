//! The board contract (taskflow's job board plus leases with fencing
//! tokens) and the enum that dispatches it to a backend.

use std::future::Future;
use std::time::Duration;

use crate::error::Result;
use crate::job::{Abandon, Claimed, JobId, JobInfo, JobState, Lease, ListFilter, NewJob, Page};
use crate::redis::{RedisBoard, RedisOptions};
use crate::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};

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

    /// Posts several jobs to `queue`, in one round trip where the backend
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
        self.claim_holding(queues, who, expiry, count, 0)
    }

    /// [`claim`](Board::claim) for a worker that holds `holding` jobs now.
    /// A suspect (a job whose worker died while it held several, so the
    /// crash could not be blamed on one) is given only to a claimer holding
    /// none, as the only job of the claim ([`Claimed::suspect`]), so that a
    /// poison pill shows itself by crashing a worker alone.
    fn claim_holding(
        &self,
        queues: &[&str],
        who: &str,
        expiry: Duration,
        count: usize,
        holding: usize,
    ) -> impl Future<Output = Result<Vec<Claimed>>> + Send;

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
    fn consume(&self, lease: &Lease) -> impl Future<Output = Result<()>> + Send;

    /// Consumes several jobs at once (one round trip where the backend can);
    /// one result per lease, in order.
    fn consume_many(&self, leases: &[Lease]) -> impl Future<Output = Result<Vec<Result<()>>>> + Send {
        async move {
            let mut out = Vec::with_capacity(leases.len());
            for lease in leases {
                out.push(self.consume(lease).await);
            }
            Ok(out)
        }
    }

    /// Consumes `done`, then claims like [`claim_holding`](Board::claim_holding)
    /// (`holding` counts the jobs still running, not `done`): a worker's
    /// settle-and-take step, in one round trip where the backend can.
    fn consume_then_claim(
        &self,
        done: &[Lease],
        queues: &[&str],
        who: &str,
        expiry: Duration,
        count: usize,
        holding: usize,
    ) -> impl Future<Output = Result<(Vec<Result<()>>, Vec<Claimed>)>> + Send {
        async move {
            validate_claim(who, expiry, count)?;
            let consumed = self.consume_many(done).await?;
            // The consumes are settled: a failed claim must not make the
            // caller consume them again; it claims next time round.
            let claimed = match self.claim_holding(queues, who, expiry, count, holding).await {
                Ok(claimed) => claimed,
                Err(e) => {
                    tracing::warn!(error = %e, "claim after consume failed; retrying on the next round");
                    Vec::new()
                }
            };
            Ok((consumed, claimed))
        }
    }

    /// Gives the claim back; returns where the job went (ready, scheduled,
    /// or trashed when a counted retry used up its attempts).
    fn abandon(&self, lease: &Lease, how: Abandon) -> impl Future<Output = Result<JobState>> + Send;

    /// Gives the job up: it moves to the trash with `reason`.
    fn trash(&self, lease: &Lease, reason: &str) -> impl Future<Output = Result<()>> + Send;

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

/// Where a board is: the options to connect to it. Workers and the CLI
/// carry this (not a connection) across `fork`.
#[derive(Debug, Clone, PartialEq)]
pub enum BoardSpec {
    /// A Redis board.
    Redis(RedisOptions),
    /// A ZooKeeper board.
    ZooKeeper(ZooKeeperOptions),
}

impl BoardSpec {
    /// Connects to the board.
    pub async fn connect(&self) -> Result<AnyBoard> {
        Ok(match self {
            BoardSpec::Redis(o) => AnyBoard::Redis(RedisBoard::with_options(o.clone()).await?),
            BoardSpec::ZooKeeper(o) => AnyBoard::ZooKeeper(ZooKeeperBoard::connect(o.clone()).await?),
        })
    }

    /// The Redis options, when this is a Redis board.
    pub fn as_redis(&self) -> Option<&RedisOptions> {
        match self {
            BoardSpec::Redis(o) => Some(o),
            BoardSpec::ZooKeeper(_) => None,
        }
    }

    /// How long a lease of length `expiry` can be trusted without a
    /// confirmed extend: `expiry`, and on ZooKeeper at most the session
    /// timeout (a claim also ends with the session that made it).
    pub fn lease_horizon(&self, expiry: Duration) -> Duration {
        match self {
            BoardSpec::Redis(_) => expiry,
            BoardSpec::ZooKeeper(o) => expiry.min(o.session_timeout),
        }
    }

    /// The backend's name, for messages.
    pub fn backend(&self) -> &'static str {
        match self {
            BoardSpec::Redis(_) => "Redis",
            BoardSpec::ZooKeeper(_) => "ZooKeeper",
        }
    }
}

macro_rules! dispatch {
    ($self:ident, $b:ident => $call:expr) => {
        match $self {
            AnyBoard::Redis($b) => $call.await,
            AnyBoard::ZooKeeper($b) => $call.await,
        }
    };
}

/// A board of any backend (dispatch through an enum, not a trait object).
// A board is made once per process and shared by reference or cheap clone,
// so the Redis variant's size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum AnyBoard {
    /// The Redis backend.
    Redis(RedisBoard),
    /// The ZooKeeper backend.
    ZooKeeper(ZooKeeperBoard),
}

impl AnyBoard {
    /// The server's clock, in ms since the epoch: what leases, schedules
    /// and worker liveness are measured on (never a host's clock).
    pub async fn server_ms(&self) -> Result<i64> {
        dispatch!(self, b => b.server_ms())
    }

    /// The queues that hold job `id` (usually one; a pipeline step keeps
    /// its id in the next queue): for commands given an id without a queue.
    pub async fn queues_of(&self, id: &JobId) -> Result<Vec<String>> {
        dispatch!(self, b => b.queues_of(id))
    }

    /// The Redis board, when this is one.
    pub fn as_redis(&self) -> Option<&RedisBoard> {
        match self {
            AnyBoard::Redis(b) => Some(b),
            AnyBoard::ZooKeeper(_) => None,
        }
    }
}

impl Board for AnyBoard {
    async fn post(&self, queue: &str, job: NewJob) -> Result<JobId> {
        dispatch!(self, b => b.post(queue, job))
    }
    async fn post_many(&self, queue: &str, jobs: &[NewJob]) -> Result<Vec<Result<JobId>>> {
        dispatch!(self, b => Board::post_many(b, queue, jobs))
    }
    async fn claim_holding(
        &self,
        queues: &[&str],
        who: &str,
        expiry: Duration,
        count: usize,
        holding: usize,
    ) -> Result<Vec<Claimed>> {
        dispatch!(self, b => b.claim_holding(queues, who, expiry, count, holding))
    }
    async fn claim_job(
        &self,
        queue: &str,
        job: &JobId,
        who: &str,
        expiry: Option<Duration>,
    ) -> Result<Claimed> {
        dispatch!(self, b => b.claim_job(queue, job, who, expiry))
    }
    async fn extend(&self, lease: &Lease, expiry: Duration) -> Result<()> {
        dispatch!(self, b => b.extend(lease, expiry))
    }
    async fn consume(&self, lease: &Lease) -> Result<()> {
        dispatch!(self, b => b.consume(lease))
    }
    async fn consume_many(&self, leases: &[Lease]) -> Result<Vec<Result<()>>> {
        dispatch!(self, b => b.consume_many(leases))
    }
    async fn consume_then_claim(
        &self,
        done: &[Lease],
        queues: &[&str],
        who: &str,
        expiry: Duration,
        count: usize,
        holding: usize,
    ) -> Result<(Vec<Result<()>>, Vec<Claimed>)> {
        dispatch!(self, b => b.consume_then_claim(done, queues, who, expiry, count, holding))
    }
    async fn abandon(&self, lease: &Lease, how: Abandon) -> Result<JobState> {
        dispatch!(self, b => b.abandon(lease, how))
    }
    async fn trash(&self, lease: &Lease, reason: &str) -> Result<()> {
        dispatch!(self, b => b.trash(lease, reason))
    }
    async fn state(&self, queue: &str, job: &JobId) -> Result<JobState> {
        dispatch!(self, b => b.state(queue, job))
    }
    async fn show(&self, queue: &str, job: &JobId) -> Result<JobInfo> {
        dispatch!(self, b => b.show(queue, job))
    }
    async fn find_owner(&self, queue: &str, job: &JobId) -> Result<Option<String>> {
        dispatch!(self, b => b.find_owner(queue, job))
    }
    async fn list(&self, queue: &str, filter: ListFilter, page: Page) -> Result<Vec<JobInfo>> {
        dispatch!(self, b => b.list(queue, filter, page))
    }
    async fn job_count(&self, queue: &str) -> Result<usize> {
        dispatch!(self, b => b.job_count(queue))
    }
    async fn reap(&self, queue: &str) -> Result<ReapReport> {
        dispatch!(self, b => b.reap(queue))
    }
    async fn wait(&self, queues: &[&str], timeout: Duration) -> Result<bool> {
        dispatch!(self, b => b.wait(queues, timeout))
    }
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
