//! The operators' reads (`Inspect`): queues at a glance (`overview.lua`),
//! per-minute throughput (written by `lib/stats.lua`), dependencies.

use std::collections::HashMap;

use futures_util::future::try_join_all;

use crate::board::{Dependencies, Minute, QueueOverview, QueueSettings, StateCounts, MAX_MINUTES};
use crate::error::Result;
use crate::job::JobId;
use crate::redis::board::RedisBoard;
use crate::redis::reply::Reply;
use crate::redis::scripts::{self, SCRIPTS};

impl RedisBoard {
    /// Each queue at a glance, one script call per queue, concurrently.
    pub async fn overview(&self, queues: &[String]) -> Result<Vec<QueueOverview>> {
        try_join_all(queues.iter().map(|q| self.overview_of(q))).await
    }

    async fn overview_of(&self, queue: &str) -> Result<QueueOverview> {
        let keys = self.keys(queue)?;
        let reply = scripts::call::<&str>(&self.conn, &SCRIPTS.overview, &keys, &[]).await?;
        let n = |i| reply.int(i).map(|v| Some(v.max(0) as u64));
        let counts = StateCounts {
            ready: n(1)?,
            scheduled: n(2)?,
            waiting: n(3)?,
            claimed: n(4)?,
            completed: n(5)?,
            trashed: n(6)?,
            cancelled: n(7)?,
            quarantined: n(8)?,
        };
        Ok(QueueOverview {
            queue: queue.to_owned(),
            counts,
            oldest_ready_ms: optional(&reply, 11)?,
            settings: Some(QueueSettings {
                paused: reply.string(9)? == "1",
                limit: optional(&reply, 10)?.map(|l: i64| l.clamp(0, u32::MAX as i64) as u32),
            }),
        })
    }

    /// Jobs completed and failed per minute, the last `minutes` (at most
    /// 120) ending with the current one.
    pub async fn throughput(&self, queue: &str, minutes: usize) -> Result<Vec<Minute>> {
        let keys = self.keys(queue)?;
        let minutes = minutes.clamp(1, MAX_MINUTES) as i64;
        let now = self.server_ms().await?.div_euclid(60_000);
        let first = now - minutes + 1;
        let hours: Vec<i64> = (first.div_euclid(60)..=now.div_euclid(60)).collect();
        let mut pipe = redis::pipe();
        for h in &hours {
            pipe.hgetall(keys.minutes(*h));
        }
        let maps: Vec<HashMap<String, u64>> = self.conn.query_pipe(&pipe).await?;
        let count = |minute: i64, kind: &str| {
            let map = hours
                .iter()
                .position(|h| *h == minute.div_euclid(60))
                .map(|i| &maps[i]);
            let field = format!("{}.{kind}", minute.rem_euclid(60));
            map.and_then(|m| m.get(&field)).copied().unwrap_or(0)
        };
        Ok((first..=now)
            .map(|m| Minute {
                at_ms: m * 60_000,
                completed: count(m, "completed"),
                failed: count(m, "failed"),
            })
            .collect())
    }

    /// A job's unmet dependencies and its dependents.
    pub async fn dependencies(&self, queue: &str, job: &JobId) -> Result<Dependencies> {
        let keys = self.keys(queue)?;
        let mut pipe = redis::pipe();
        pipe.smembers(keys.deps(job.as_str()))
            .smembers(keys.dependents(job.as_str()));
        let (deps, dependents): (Vec<String>, Vec<String>) = self.conn.query_pipe(&pipe).await?;
        Ok(Dependencies {
            depends_on: refs(deps),
            dependents: refs(dependents),
        })
    }
}

/// `queue\nid` references, sorted.
fn refs(list: Vec<String>) -> Vec<(String, JobId)> {
    let mut out: Vec<(String, JobId)> = list
        .into_iter()
        .filter_map(|r| r.split_once('\n').map(|(q, id)| (q.to_owned(), JobId::from(id))))
        .collect();
    out.sort_by(|a, b| (a.0.as_str(), a.1.as_str()).cmp(&(b.0.as_str(), b.1.as_str())));
    out
}

/// An integer reply element, `None` when empty.
fn optional(reply: &Reply, i: usize) -> Result<Option<i64>> {
    let s = reply.string(i)?;
    if s.is_empty() {
        return Ok(None);
    }
    reply.int(i).map(Some)
}
