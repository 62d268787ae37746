//! A board of any backend: one enum dispatching every capability to the
//! backend it holds (no trait objects), the one place that matches on it.

use std::time::Duration;

use std::collections::HashMap;

use crate::board::{
    Admin, Board, CancelStream, ClaimRequest, Dependencies, EventStream, Events, FailureGroup, Inspect,
    Maintenance, Minute, Presence, QueueCounts, QueueOverview, QueueSettings, ReapReport, Recovered,
    Recovery, SettleResult, Woken, WorkerInfo,
};
use crate::error::Result;
use crate::job::{Abandon, Claimed, JobId, JobInfo, JobState, Lease, ListFilter, NewJob, Page, Priority};
use crate::recurring::{RecurringInfo, RecurringJob};
use crate::redis::RedisBoard;
use crate::stats::QueueStats;
#[cfg(feature = "zookeeper")]
use crate::zookeeper::ZooKeeperBoard;

macro_rules! dispatch {
    ($self:ident, $b:ident => $call:expr) => {
        match $self {
            AnyBoard::Redis($b) => $call.await,
            #[cfg(feature = "zookeeper")]
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
    #[cfg(feature = "zookeeper")]
    ZooKeeper(ZooKeeperBoard),
}

impl AnyBoard {
    /// The Redis board, when this is one (the benchmark measures Redis
    /// itself).
    pub fn as_redis(&self) -> Option<&RedisBoard> {
        match self {
            AnyBoard::Redis(b) => Some(b),
            #[cfg(feature = "zookeeper")]
            AnyBoard::ZooKeeper(_) => None,
        }
    }
}

impl From<RedisBoard> for AnyBoard {
    fn from(board: RedisBoard) -> AnyBoard {
        AnyBoard::Redis(board)
    }
}

#[cfg(feature = "zookeeper")]
impl From<ZooKeeperBoard> for AnyBoard {
    fn from(board: ZooKeeperBoard) -> AnyBoard {
        AnyBoard::ZooKeeper(board)
    }
}

impl Board for AnyBoard {
    async fn post(&self, queue: &str, job: NewJob) -> Result<JobId> {
        dispatch!(self, b => b.post(queue, job))
    }
    async fn post_many(&self, queue: &str, jobs: &[NewJob]) -> Result<Vec<Result<JobId>>> {
        dispatch!(self, b => Board::post_many(b, queue, jobs))
    }
    async fn claim_with(&self, request: &ClaimRequest<'_>) -> Result<Vec<Claimed>> {
        dispatch!(self, b => b.claim_with(request))
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
    async fn consume(&self, lease: Lease) -> SettleResult {
        dispatch!(self, b => b.consume(lease))
    }
    async fn consume_many(&self, leases: Vec<Lease>) -> Vec<SettleResult> {
        dispatch!(self, b => b.consume_many(leases))
    }
    async fn consume_then_claim(
        &self,
        done: Vec<Lease>,
        request: &ClaimRequest<'_>,
    ) -> (Vec<SettleResult>, Result<Vec<Claimed>>) {
        dispatch!(self, b => b.consume_then_claim(done, request))
    }
    async fn abandon(&self, lease: Lease, how: Abandon) -> SettleResult<JobState> {
        dispatch!(self, b => b.abandon(lease, how))
    }
    async fn trash(&self, lease: Lease, reason: &str) -> SettleResult {
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
    async fn wait_as(&self, queues: &[&str], who: Option<&str>, timeout: Duration) -> Result<Woken> {
        dispatch!(self, b => b.wait_as(queues, who, timeout))
    }
    async fn handed_to(&self, queues: &[&str], who: &str, timeout: Duration) -> Result<Vec<Claimed>> {
        dispatch!(self, b => b.handed_to(queues, who, timeout))
    }
    async fn withdraw(&self, queues: &[&str], who: &str) -> Result<Vec<Claimed>> {
        dispatch!(self, b => b.withdraw(queues, who))
    }
    async fn release_unread(&self, queues: &[&str], who: &str) -> Result<usize> {
        dispatch!(self, b => b.release_unread(queues, who))
    }
}

impl Admin for AnyBoard {
    async fn queues(&self) -> Result<Vec<String>> {
        dispatch!(self, b => b.queues())
    }
    async fn queues_of(&self, id: &JobId) -> Result<Vec<String>> {
        dispatch!(self, b => Admin::queues_of(b, id))
    }
    async fn server_ms(&self) -> Result<i64> {
        dispatch!(self, b => Admin::server_ms(b))
    }
    async fn counts(&self, queues: &[String]) -> Result<QueueCounts> {
        dispatch!(self, b => Admin::counts(b, queues))
    }
    async fn settings(&self, queue: &str) -> Result<QueueSettings> {
        dispatch!(self, b => b.settings(queue))
    }
    async fn pause(&self, queue: &str) -> Result<()> {
        dispatch!(self, b => b.pause(queue))
    }
    async fn resume(&self, queue: &str) -> Result<()> {
        dispatch!(self, b => b.resume(queue))
    }
    async fn set_limit(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        dispatch!(self, b => b.set_limit(queue, limit))
    }
    async fn set_priority(&self, queue: &str, job: &JobId, priority: Priority) -> Result<JobState> {
        dispatch!(self, b => b.set_priority(queue, job, priority))
    }
    async fn cancel(
        &self,
        queue: &str,
        jobs: &[JobId],
        with_dependents: bool,
    ) -> Result<Vec<(String, JobId)>> {
        dispatch!(self, b => b.cancel(queue, jobs, with_dependents))
    }
    async fn tag(&self, queue: &str, job: &JobId, tags: &[&str]) -> Result<Vec<String>> {
        dispatch!(self, b => b.tag(queue, job, tags))
    }
    async fn untag(&self, queue: &str, job: &JobId, tags: &[&str]) -> Result<Vec<String>> {
        dispatch!(self, b => b.untag(queue, job, tags))
    }
    async fn tagged(&self, queue: &str, tag: &str, page: Page) -> Result<Vec<JobId>> {
        dispatch!(self, b => b.tagged(queue, tag, page))
    }
    async fn top_tags(&self, queue: &str, page: Page) -> Result<Vec<(String, u64)>> {
        dispatch!(self, b => b.top_tags(queue, page))
    }
    async fn track(&self, queue: &str, job: &JobId) -> Result<()> {
        dispatch!(self, b => b.track(queue, job))
    }
    async fn untrack(&self, queue: &str, job: &JobId) -> Result<()> {
        dispatch!(self, b => b.untrack(queue, job))
    }
    async fn tracked(&self, queue: &str) -> Result<Vec<JobId>> {
        dispatch!(self, b => b.tracked(queue))
    }
    async fn failed(&self, queue: &str) -> Result<Vec<FailureGroup>> {
        dispatch!(self, b => b.failed(queue))
    }
    async fn failed_jobs(&self, queue: &str, group: &str, page: Page) -> Result<Vec<JobId>> {
        dispatch!(self, b => b.failed_jobs(queue, group, page))
    }
    async fn retry(&self, queue: &str, jobs: &[JobId]) -> Result<Vec<Result<()>>> {
        dispatch!(self, b => b.retry(queue, jobs))
    }
    async fn purge(&self, queue: &str, jobs: &[JobId]) -> Result<Vec<Result<()>>> {
        dispatch!(self, b => b.purge(queue, jobs))
    }
    async fn settle_failed(&self, queue: &str, group: Option<&str>, purge: bool) -> Result<usize> {
        dispatch!(self, b => b.settle_failed(queue, group, purge))
    }
    async fn history(&self, queue: &str, job: &JobId) -> Result<Vec<serde_json::Value>> {
        dispatch!(self, b => b.history(queue, job))
    }
    async fn stats(&self, queue: &str, day: Option<i64>) -> Result<QueueStats> {
        dispatch!(self, b => b.stats(queue, day))
    }
    async fn recur(&self, queue: &str, job: RecurringJob) -> Result<String> {
        dispatch!(self, b => b.recur(queue, job))
    }
    async fn unrecur(&self, queue: &str, id: &str) -> Result<()> {
        dispatch!(self, b => b.unrecur(queue, id))
    }
    async fn recurring(&self, queue: &str) -> Result<Vec<RecurringInfo>> {
        dispatch!(self, b => b.recurring(queue))
    }
    async fn config(&self) -> Result<HashMap<String, String>> {
        dispatch!(self, b => b.config())
    }
    async fn set_config(&self, key: &str, value: Option<&str>) -> Result<()> {
        dispatch!(self, b => b.set_config(key, value))
    }
}

impl Inspect for AnyBoard {
    async fn overview(&self, queues: &[String]) -> Result<Vec<QueueOverview>> {
        dispatch!(self, b => Inspect::overview(b, queues))
    }
    async fn throughput(&self, queue: &str, minutes: usize) -> Result<Vec<Minute>> {
        dispatch!(self, b => Inspect::throughput(b, queue, minutes))
    }
    async fn dependencies(&self, queue: &str, job: &JobId) -> Result<Dependencies> {
        dispatch!(self, b => Inspect::dependencies(b, queue, job))
    }
}

impl Events for AnyBoard {
    async fn events(&self, tracked_only: bool) -> Result<EventStream> {
        dispatch!(self, b => Events::events(b, tracked_only))
    }
    async fn cancels_of(&self, owner: &str) -> Result<Option<CancelStream>> {
        dispatch!(self, b => Events::cancels_of(b, owner))
    }
}

impl Presence for AnyBoard {
    async fn record_worker(&self, info: &WorkerInfo) -> Result<()> {
        dispatch!(self, b => b.record_worker(info))
    }
    async fn remove_worker(&self, owner: &str) -> Result<()> {
        dispatch!(self, b => b.remove_worker(owner))
    }
    async fn live_workers(&self) -> Result<Vec<WorkerInfo>> {
        dispatch!(self, b => b.live_workers())
    }
}

impl Recovery for AnyBoard {
    async fn recover_owner(&self, queue: &str, owner: &str, reason: &str) -> Result<Recovered> {
        dispatch!(self, b => Recovery::recover_owner(b, queue, owner, reason))
    }
}

impl Maintenance for AnyBoard {
    async fn elect(&self, queue: &str, who: &str, ttl: Duration) -> Result<bool> {
        dispatch!(self, b => b.elect(queue, who, ttl))
    }
    async fn resign(&self, queue: &str, who: &str) -> Result<()> {
        dispatch!(self, b => b.resign(queue, who))
    }
    async fn leader(&self, queue: &str) -> Result<Option<String>> {
        dispatch!(self, b => b.leader(queue))
    }
    async fn index_postings(&self, queue: &str) -> Result<usize> {
        dispatch!(self, b => b.index_postings(queue))
    }
    async fn release_outbox(&self, queue: &str) -> Result<usize> {
        dispatch!(self, b => b.release_outbox(queue))
    }
    async fn spawn_recurring(&self, queue: &str) -> Result<usize> {
        dispatch!(self, b => b.spawn_recurring(queue))
    }
}
