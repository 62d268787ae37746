//! overview: one queue at a glance on ZooKeeper. The live jobs are counted
//! from the board's snapshot of the jobs path (what `list` reads), the
//! finished ones from their paths' children (completed and cancelled jobs
//! share the history, told apart by the entry's name) and the waiting
//! ones from their postings' directory. Unlike
//! Redis' O(1) counts, this reads every child name of the queue's paths.

use super::list::live_state;
use crate::board::{QueueCounts, QueueOverview, QueueSettings, StateCounts};
use crate::error::Result;
use crate::job::JobState;
use crate::zookeeper::paths;
use crate::zookeeper::ZooKeeperBoard;

impl ZooKeeperBoard {
    /// One queue at a glance (see the module docs).
    pub(crate) async fn overview_of(&self, queue: &str) -> Result<QueueOverview> {
        let paths = self.paths(queue)?;
        let (snap, _) = self.snapshot(&paths, false).await?;
        let stored = self.stored_settings(&paths, false).await?.0;
        let known = self.known(&paths, &snap).await?;
        let now = self.now_ms();
        let (mut ready, mut scheduled, mut claimed) = (0u64, 0u64, 0u64);
        let mut oldest_ready_ms: Option<i64> = None;
        for k in &known {
            match live_state(&snap, k, now) {
                JobState::Claimed => claimed += 1,
                JobState::Scheduled => scheduled += 1,
                _ => {
                    ready += 1;
                    oldest_ready_ms = Some(oldest_ready_ms.map_or(k.ctime_ms, |o| o.min(k.ctime_ms)));
                }
            }
        }
        let what = format!("cannot count the jobs of queue {queue}");
        let trashed = self.children(&what, &paths.trash).await?.len() as u64;
        let quarantined = self
            .children(&what, &paths.quarantine)
            .await?
            .iter()
            .filter(|n| !n.ends_with(".reason"))
            .count() as u64;
        let (mut completed, mut cancelled) = (0u64, 0u64);
        for hour in self.children(&what, &paths.history).await? {
            if let Ok(hour) = hour.parse() {
                for entry in self.children(&what, &paths.history_bucket(hour)).await? {
                    match paths::history_job(&entry).1 {
                        true => cancelled += 1,
                        false => completed += 1,
                    }
                }
            }
        }
        Ok(QueueOverview {
            queue: queue.to_owned(),
            counts: StateCounts {
                ready: Some(ready),
                scheduled: Some(scheduled),
                waiting: Some(self.count_waiting(&paths).await?),
                claimed: Some(claimed),
                completed: Some(completed),
                trashed: Some(trashed),
                cancelled: Some(cancelled),
                quarantined: Some(quarantined),
            },
            oldest_ready_ms,
            settings: Some(QueueSettings {
                paused: stored.paused,
                limit: stored.limit,
            }),
        })
    }
}

impl ZooKeeperBoard {
    /// How many jobs `queues` hold together, from each queue's overview:
    /// the listed jobs are the live ones (ready, scheduled, claimed), the
    /// completed ones exclude cancelled jobs (as on Redis).
    pub(crate) async fn counts_of(&self, queues: &[String]) -> Result<QueueCounts> {
        let mut total = QueueCounts::default();
        for q in queues {
            let c = self.overview_of(q).await?.counts;
            let n = |v: Option<u64>| v.unwrap_or(0) as usize;
            total.listed += n(c.ready) + n(c.scheduled) + n(c.claimed);
            total.claimed += n(c.claimed);
            total.completed += n(c.completed);
            total.trashed += n(c.trashed);
        }
        Ok(total)
    }
}
