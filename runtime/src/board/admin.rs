//! Operator features beyond the taskflow core (qless's): queues, pause
//! and limits, priorities, cancel, tags, tracking, failure groups with
//! retry and purge, per-job history, statistics, recurring jobs and the
//! board's configuration. Both backends implement [`Admin`]; a backend that
//! cannot offer one answers with an error for which
//! [`Error::is_unsupported`](crate::Error::is_unsupported) is true.

use std::collections::HashMap;
use std::future::Future;

use crate::error::Result;
use crate::job::{JobId, JobState, Page, Priority};
use crate::recurring::{RecurringInfo, RecurringJob};
use crate::stats::QueueStats;

/// A queue's settings (see [`Admin::pause`], [`Admin::set_limit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct QueueSettings {
    /// Claims hand out nothing while paused.
    pub paused: bool,
    /// At most this many jobs of the queue are claimed at once, across all
    /// workers (`None`: no limit).
    pub limit: Option<u32>,
}

/// Jobs trashed for one kind of failure in one queue.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FailureGroup {
    /// The queue.
    pub queue: String,
    /// The kind of failure (`error`, `fatal`, `stalled`, `crashed`,
    /// `poison-pill`, `timeout`, …).
    pub group: String,
    /// Jobs in it.
    pub count: u64,
}

/// How many jobs a set of queues holds (progress reports,
/// `--until-drained`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Jobs in the listings (ready, scheduled, claimed).
    pub listed: usize,
    /// Jobs claimed right now.
    pub claimed: usize,
    /// Jobs in the completed history.
    pub completed: usize,
    /// Jobs in the trash.
    pub trashed: usize,
}

/// The operator features of a board (see the module docs).
pub trait Admin: Sync {
    /// The queues this board knows: those jobworker posted to or claimed
    /// from, sorted.
    fn queues(&self) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// The queues that hold job `id` (usually one; a pipeline step keeps
    /// its id in the next queue), for commands given an id alone.
    fn queues_of(&self, id: &JobId) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// The server's clock, in ms since the epoch: what leases, schedules
    /// and worker liveness are measured on (never a host's clock).
    fn server_ms(&self) -> impl Future<Output = Result<i64>> + Send;

    /// How many jobs `queues` hold together.
    fn counts(&self, queues: &[String]) -> impl Future<Output = Result<QueueCounts>> + Send;

    /// A queue's settings.
    fn settings(&self, queue: &str) -> impl Future<Output = Result<QueueSettings>> + Send;

    /// Stops handing out the queue's jobs (claims take nothing from it).
    fn pause(&self, queue: &str) -> impl Future<Output = Result<()>> + Send;

    /// Hands out a paused queue's jobs again, waking idle workers.
    fn resume(&self, queue: &str) -> impl Future<Output = Result<()>> + Send;

    /// At most `limit` jobs of the queue claimed at once, across all
    /// workers (`None`: no limit).
    fn set_limit(&self, queue: &str, limit: Option<u32>) -> impl Future<Output = Result<()>> + Send;

    /// Changes the priority of a job that has not finished; returns its
    /// state. Refuses a finished job (`is_finished`).
    fn set_priority(
        &self,
        queue: &str,
        job: &JobId,
        priority: Priority,
    ) -> impl Future<Output = Result<JobState>> + Send;

    /// Cancels jobs that have not finished (a running one's handler is
    /// stopped); refuses one with live dependents unless `with_dependents`,
    /// which cancels them too. Returns every (queue, job) cancelled.
    fn cancel(
        &self,
        queue: &str,
        jobs: &[JobId],
        with_dependents: bool,
    ) -> impl Future<Output = Result<Vec<(String, JobId)>>> + Send;

    /// Adds tags to a job; returns its tags.
    fn tag(
        &self,
        queue: &str,
        job: &JobId,
        tags: &[&str],
    ) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// Removes tags from a job; returns its tags.
    fn untag(
        &self,
        queue: &str,
        job: &JobId,
        tags: &[&str],
    ) -> impl Future<Output = Result<Vec<String>>> + Send;

    /// Jobs carrying `tag`, most recently tagged first.
    fn tagged(&self, queue: &str, tag: &str, page: Page) -> impl Future<Output = Result<Vec<JobId>>> + Send;

    /// The most used tags, with their counts.
    fn top_tags(&self, queue: &str, page: Page) -> impl Future<Output = Result<Vec<(String, u64)>>> + Send;

    /// Tracks a job: its events also go to their own channels.
    fn track(&self, queue: &str, job: &JobId) -> impl Future<Output = Result<()>> + Send;

    /// Stops tracking a job.
    fn untrack(&self, queue: &str, job: &JobId) -> impl Future<Output = Result<()>> + Send;

    /// The tracked jobs of a queue.
    fn tracked(&self, queue: &str) -> impl Future<Output = Result<Vec<JobId>>> + Send;

    /// The queue's failure groups (trashed jobs by the kind of their
    /// failure).
    fn failed(&self, queue: &str) -> impl Future<Output = Result<Vec<FailureGroup>>> + Send;

    /// The jobs of one failure group, most recent first.
    fn failed_jobs(
        &self,
        queue: &str,
        group: &str,
        page: Page,
    ) -> impl Future<Output = Result<Vec<JobId>>> + Send;

    /// Puts trashed jobs back to work (attempts reset); one result per job.
    fn retry(&self, queue: &str, jobs: &[JobId]) -> impl Future<Output = Result<Vec<Result<()>>>> + Send;

    /// Deletes trashed jobs for good; one result per job.
    fn purge(&self, queue: &str, jobs: &[JobId]) -> impl Future<Output = Result<Vec<Result<()>>>> + Send;

    /// Retries (or with `purge`, deletes) every trashed job of `group`, or
    /// of every group; returns how many.
    fn settle_failed(
        &self,
        queue: &str,
        group: Option<&str>,
        purge: bool,
    ) -> impl Future<Output = Result<usize>> + Send;

    /// A job's history: one JSON object per event, oldest first.
    fn history(
        &self,
        queue: &str,
        job: &JobId,
    ) -> impl Future<Output = Result<Vec<serde_json::Value>>> + Send;

    /// A queue's statistics for a day (days since the epoch; `None`: today).
    fn stats(&self, queue: &str, day: Option<i64>) -> impl Future<Output = Result<QueueStats>> + Send;

    /// Creates (or, with the id of an existing one, updates) a recurring
    /// job; returns its id.
    fn recur(&self, queue: &str, job: RecurringJob) -> impl Future<Output = Result<String>> + Send;

    /// Deletes a recurring job.
    fn unrecur(&self, queue: &str, id: &str) -> impl Future<Output = Result<()>> + Send;

    /// The recurring jobs of a queue.
    fn recurring(&self, queue: &str) -> impl Future<Output = Result<Vec<RecurringInfo>>> + Send;

    /// The board's stored configuration.
    fn config(&self) -> impl Future<Output = Result<HashMap<String, String>>> + Send;

    /// Sets (or with `None` removes) a configuration value; the value is
    /// checked against the key's rule.
    fn set_config(&self, key: &str, value: Option<&str>) -> impl Future<Output = Result<()>> + Send;
}
