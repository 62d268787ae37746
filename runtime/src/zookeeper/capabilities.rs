//! The ZooKeeper board's capabilities beyond the contract: the worker
//! registry (taskflow's conductor entities), crash recovery and the
//! server's clock are real, and so are these qless operator features:
//! cancel (`cancel.rs`), pause, resume (`settings.rs`) and concurrency
//! limits (`limit.rs`), failure groups
//! with retry and purge (`failed.rs`), the board configuration
//! (`config.rs`), the queue list (`locate.rs`), job counts
//! (`read/overview.rs`), tags (`tags.rs`), tracking (`track.rs`),
//! priority changes (`priority.rs`), job history (`history.rs`),
//! recurring jobs (`recurring.rs`), statistics and throughput
//! (`stats.rs`, `tally.rs`), the event stream (`events.rs`) and, at post,
//! unique keys (`unique.rs`) and dependencies (`deps.rs`). Maintenance
//! elects a leader per queue on an ephemeral znode (`leader.rs`); its
//! services on ZooKeeper spawn due recurring slots and settle the
//! releases a consumer left owed (there is no index to fill).

use std::collections::HashMap;
use std::time::Duration;

use crate::board::{
    Admin, CancelStream, Dependencies, EventStream, Events, FailureGroup, Inspect, Maintenance, Minute,
    Presence, QueueCounts, QueueOverview, QueueSettings, Recovered, Recovery, WorkerInfo,
};
use crate::error::{Error, Result};
use crate::job::{JobId, JobState, Page, Priority};
use crate::recurring::{RecurringInfo, RecurringJob};
use crate::stats::QueueStats;
use crate::zookeeper::ZooKeeperBoard;

impl Admin for ZooKeeperBoard {
    async fn queues(&self) -> Result<Vec<String>> {
        self.queue_names().await
    }
    async fn queues_of(&self, id: &JobId) -> Result<Vec<String>> {
        ZooKeeperBoard::queues_of(self, id).await
    }
    async fn server_ms(&self) -> Result<i64> {
        ZooKeeperBoard::server_ms(self).await
    }
    async fn counts(&self, queues: &[String]) -> Result<QueueCounts> {
        self.counts_of(queues).await
    }
    async fn settings(&self, queue: &str) -> Result<QueueSettings> {
        let stored = self.stored_settings(&self.paths(queue)?, false).await?.0;
        Ok(QueueSettings {
            paused: stored.paused,
            limit: stored.limit,
        })
    }
    async fn pause(&self, queue: &str) -> Result<()> {
        self.set_paused(queue, true).await
    }
    async fn resume(&self, queue: &str) -> Result<()> {
        self.set_paused(queue, false).await
    }
    /// Every lock on the queue's jobs counts (see `limit.rs`).
    async fn set_limit(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        self.set_queue_limit(queue, limit).await
    }
    async fn set_priority(&self, queue: &str, job: &JobId, priority: Priority) -> Result<JobState> {
        self.change_priority(queue, job, priority).await
    }
    async fn cancel(
        &self,
        queue: &str,
        ids: &[JobId],
        with_dependents: bool,
    ) -> Result<Vec<(String, JobId)>> {
        self.cancel_with(queue, ids, with_dependents).await
    }
    async fn tag(&self, queue: &str, job: &JobId, tags: &[&str]) -> Result<Vec<String>> {
        self.retag(queue, job, tags, true).await
    }
    async fn untag(&self, queue: &str, job: &JobId, tags: &[&str]) -> Result<Vec<String>> {
        self.retag(queue, job, tags, false).await
    }
    async fn tagged(&self, queue: &str, tag: &str, page: Page) -> Result<Vec<JobId>> {
        self.tagged_jobs(queue, tag, page).await
    }
    async fn top_tags(&self, queue: &str, page: Page) -> Result<Vec<(String, u64)>> {
        self.tag_counts(queue, page).await
    }
    async fn track(&self, queue: &str, job: &JobId) -> Result<()> {
        self.set_tracked(queue, job, true).await
    }
    async fn untrack(&self, queue: &str, job: &JobId) -> Result<()> {
        self.set_tracked(queue, job, false).await
    }
    async fn tracked(&self, queue: &str) -> Result<Vec<JobId>> {
        self.tracked_jobs(queue).await
    }
    /// A scan of the trash, bounded by its retention (see `failed.rs`).
    async fn failed(&self, queue: &str) -> Result<Vec<FailureGroup>> {
        self.failure_groups(queue).await
    }
    /// A scan of the trash, bounded by its retention (see `failed.rs`).
    async fn failed_jobs(&self, queue: &str, group: &str, page: Page) -> Result<Vec<JobId>> {
        self.failed_in_group(queue, group, page).await
    }
    async fn retry(&self, queue: &str, ids: &[JobId]) -> Result<Vec<Result<()>>> {
        self.retry_trashed(queue, ids).await
    }
    async fn purge(&self, queue: &str, ids: &[JobId]) -> Result<Vec<Result<()>>> {
        self.purge_trashed(queue, ids).await
    }
    async fn settle_failed(&self, queue: &str, group: Option<&str>, purge: bool) -> Result<usize> {
        self.settle_trashed(queue, group, purge).await
    }
    /// Kept in the job's record (see `history.rs`).
    async fn history(&self, queue: &str, job: &JobId) -> Result<Vec<serde_json::Value>> {
        self.job_history(queue, job).await
    }
    /// Folded from a tally entry per ended claim (see `zookeeper/stats.rs`).
    async fn stats(&self, queue: &str, day: Option<i64>) -> Result<QueueStats> {
        self.queue_stats(queue, day).await
    }
    /// A template znode per recurring job (see `zookeeper/recurring.rs`).
    async fn recur(&self, queue: &str, job: RecurringJob) -> Result<String> {
        self.recur_template(queue, job).await
    }
    async fn unrecur(&self, queue: &str, id: &str) -> Result<()> {
        self.unrecur_template(queue, id).await
    }
    async fn recurring(&self, queue: &str) -> Result<Vec<RecurringInfo>> {
        self.recurring_of(queue).await
    }
    async fn config(&self) -> Result<HashMap<String, String>> {
        ZooKeeperBoard::config(self).await
    }
    async fn set_config(&self, key: &str, value: Option<&str>) -> Result<()> {
        ZooKeeperBoard::set_config(self, key, value).await
    }
}

impl Events for ZooKeeperBoard {
    /// Written while someone listens (see `zookeeper/events.rs`).
    async fn events(&self, tracked_only: bool) -> Result<EventStream> {
        self.event_stream(tracked_only).await
    }

    /// The worker's cancel notes, on a watch (see `zookeeper/cancel.rs`).
    async fn cancels_of(&self, owner: &str) -> Result<Option<CancelStream>> {
        self.cancel_notes_of(owner).await.map(Some)
    }
}

impl Recovery for ZooKeeperBoard {
    async fn recover_owner(&self, queue: &str, owner: &str, reason: &str) -> Result<Recovered> {
        let (back, trashed) = ZooKeeperBoard::recover_owner(self, queue, owner, reason).await?;
        self.drop_cancel_notes(owner).await;
        Ok(Recovered { back, trashed })
    }
}

/// Workers are taskflow conductor entities: ephemeral, so a dead worker's
/// entry goes with its session.
impl Presence for ZooKeeperBoard {
    async fn record_worker(&self, info: &WorkerInfo) -> Result<()> {
        let queues: Vec<&str> = info.queues.iter().map(String::as_str).collect();
        let metadata = serde_json::to_value(info).map_err(|e| Error::codec(e.to_string()))?;
        self.register_worker_for(&queues, &info.owner, metadata).await
    }
    async fn remove_worker(&self, owner: &str) -> Result<()> {
        self.unregister_worker(owner).await?;
        self.drop_cancel_notes(owner).await;
        Ok(())
    }
    async fn live_workers(&self) -> Result<Vec<WorkerInfo>> {
        let mut live: Vec<WorkerInfo> = self
            .list_workers()
            .await?
            .into_iter()
            .filter_map(|entity| serde_json::from_value(entity["metadata"].clone()).ok())
            .collect();
        live.sort_by(|a, b| a.owner.cmp(&b.owner));
        Ok(live)
    }
}

/// Leader election on an ephemeral znode per queue (see
/// `zookeeper/leader.rs`); the index service has no work on ZooKeeper.
impl Maintenance for ZooKeeperBoard {
    async fn elect(&self, queue: &str, who: &str, ttl: Duration) -> Result<bool> {
        self.elect_leader(queue, who, ttl).await
    }
    async fn resign(&self, queue: &str, who: &str) -> Result<()> {
        self.resign_leader(queue, who).await
    }
    async fn leader(&self, queue: &str) -> Result<Option<String>> {
        self.current_leader(queue).await
    }
    /// Nothing to index: a claim lists the jobs path itself, so a job
    /// taskflow posted is claimable as it is (an undecodable one is
    /// quarantined by the claim that meets it).
    async fn index_postings(&self, _: &str) -> Result<usize> {
        Ok(0)
    }
    /// The releases a consumer left owed when it died before settling
    /// them (see `zookeeper/deps.rs`).
    async fn release_outbox(&self, queue: &str) -> Result<usize> {
        self.release_owed(queue).await
    }
    /// One transaction per batch of runs with the template's
    /// version-checked next slot (see `zookeeper/recurring.rs`).
    async fn spawn_recurring(&self, queue: &str) -> Result<usize> {
        self.spawn_due(queue).await
    }
}

impl Inspect for ZooKeeperBoard {
    async fn overview(&self, queues: &[String]) -> Result<Vec<QueueOverview>> {
        futures_util::future::try_join_all(queues.iter().map(|q| self.overview_of(q))).await
    }
    /// From the same tally as the statistics.
    async fn throughput(&self, queue: &str, minutes: usize) -> Result<Vec<Minute>> {
        self.queue_throughput(queue, minutes).await
    }
    async fn dependencies(&self, queue: &str, job: &JobId) -> Result<Dependencies> {
        self.dependencies_of(queue, job).await
    }
}
