//! The Redis board's capabilities beyond the contract ([`Admin`],
//! [`Events`]; [`Recovery`](crate::board::Recovery) is in `recover.rs`): each verb is written once, in the file of
//! its feature; this file only hands the trait calls to them.

use std::collections::HashMap;

use futures_util::StreamExt;

use crate::board::{
    Admin, CancelStream, Dependencies, EventStream, Events, FailureGroup, Inspect, Minute, QueueCounts,
    QueueOverview, QueueSettings,
};
use crate::error::Result;
use crate::job::{JobId, JobState, Page, Priority};
use crate::recurring::{RecurringInfo, RecurringJob};
use crate::redis::board::RedisBoard;
use crate::stats::QueueStats;

impl Admin for RedisBoard {
    async fn queues(&self) -> Result<Vec<String>> {
        RedisBoard::queues(self).await
    }
    async fn queues_of(&self, id: &JobId) -> Result<Vec<String>> {
        RedisBoard::queues_of(self, id).await
    }
    async fn server_ms(&self) -> Result<i64> {
        RedisBoard::server_ms(self).await
    }
    async fn counts(&self, queues: &[String]) -> Result<QueueCounts> {
        RedisBoard::counts(self, queues).await
    }
    async fn settings(&self, queue: &str) -> Result<QueueSettings> {
        RedisBoard::settings(self, queue).await
    }
    async fn pause(&self, queue: &str) -> Result<()> {
        RedisBoard::pause(self, queue).await
    }
    async fn resume(&self, queue: &str) -> Result<()> {
        RedisBoard::resume(self, queue).await
    }
    async fn set_limit(&self, queue: &str, limit: Option<u32>) -> Result<()> {
        RedisBoard::set_limit(self, queue, limit).await
    }
    async fn set_priority(&self, queue: &str, job: &JobId, priority: Priority) -> Result<JobState> {
        RedisBoard::set_priority(self, queue, job, priority).await
    }
    async fn cancel(
        &self,
        queue: &str,
        jobs: &[JobId],
        with_dependents: bool,
    ) -> Result<Vec<(String, JobId)>> {
        RedisBoard::cancel(self, queue, jobs, with_dependents).await
    }
    async fn tag(&self, queue: &str, job: &JobId, tags: &[&str]) -> Result<Vec<String>> {
        RedisBoard::tag(self, queue, job, tags).await
    }
    async fn untag(&self, queue: &str, job: &JobId, tags: &[&str]) -> Result<Vec<String>> {
        RedisBoard::untag(self, queue, job, tags).await
    }
    async fn tagged(&self, queue: &str, tag: &str, page: Page) -> Result<Vec<JobId>> {
        RedisBoard::tagged(self, queue, tag, page).await
    }
    async fn top_tags(&self, queue: &str, page: Page) -> Result<Vec<(String, u64)>> {
        RedisBoard::top_tags(self, queue, page).await
    }
    async fn track(&self, queue: &str, job: &JobId) -> Result<()> {
        RedisBoard::track(self, queue, job).await
    }
    async fn untrack(&self, queue: &str, job: &JobId) -> Result<()> {
        RedisBoard::untrack(self, queue, job).await
    }
    async fn tracked(&self, queue: &str) -> Result<Vec<JobId>> {
        RedisBoard::tracked(self, queue).await
    }
    async fn failed(&self, queue: &str) -> Result<Vec<FailureGroup>> {
        RedisBoard::failed(self, queue).await
    }
    async fn failed_jobs(&self, queue: &str, group: &str, page: Page) -> Result<Vec<JobId>> {
        RedisBoard::failed_jobs(self, queue, group, page).await
    }
    async fn retry(&self, queue: &str, jobs: &[JobId]) -> Result<Vec<Result<()>>> {
        RedisBoard::retry(self, queue, jobs).await
    }
    async fn purge(&self, queue: &str, jobs: &[JobId]) -> Result<Vec<Result<()>>> {
        RedisBoard::purge(self, queue, jobs).await
    }
    async fn settle_failed(&self, queue: &str, group: Option<&str>, purge: bool) -> Result<usize> {
        RedisBoard::settle_failed(self, queue, group, purge).await
    }
    async fn history(&self, queue: &str, job: &JobId) -> Result<Vec<serde_json::Value>> {
        RedisBoard::history(self, queue, job).await
    }
    async fn stats(&self, queue: &str, day: Option<i64>) -> Result<QueueStats> {
        RedisBoard::stats(self, queue, day).await
    }
    async fn recur(&self, queue: &str, job: RecurringJob) -> Result<String> {
        RedisBoard::recur(self, queue, job).await
    }
    async fn unrecur(&self, queue: &str, id: &str) -> Result<()> {
        RedisBoard::unrecur(self, queue, id).await
    }
    async fn recurring(&self, queue: &str) -> Result<Vec<RecurringInfo>> {
        RedisBoard::recurring(self, queue).await
    }
    async fn config(&self) -> Result<HashMap<String, String>> {
        RedisBoard::config(self).await
    }
    async fn set_config(&self, key: &str, value: Option<&str>) -> Result<()> {
        RedisBoard::set_config(self, key, value).await
    }
}

impl Events for RedisBoard {
    async fn events(&self, tracked_only: bool) -> Result<EventStream> {
        Ok(RedisBoard::events(self, tracked_only).await?.boxed())
    }
    async fn cancels_of(&self, owner: &str) -> Result<Option<CancelStream>> {
        Ok(Some(RedisBoard::cancels_of(self, owner).await?.boxed()))
    }
}

impl Inspect for RedisBoard {
    async fn overview(&self, queues: &[String]) -> Result<Vec<QueueOverview>> {
        RedisBoard::overview(self, queues).await
    }
    async fn throughput(&self, queue: &str, minutes: usize) -> Result<Vec<Minute>> {
        RedisBoard::throughput(self, queue, minutes).await
    }
    async fn dependencies(&self, queue: &str, job: &JobId) -> Result<Dependencies> {
        RedisBoard::dependencies(self, queue, job).await
    }
}
