//! list: a page of a queue's jobs in one state (live ones from a listing,
//! completed ones from the history, waiting, trashed and quarantined ones
//! from their znodes).

use std::cmp::Reverse;
use std::sync::Arc;

use super::Facts;
use crate::error::Result;
use crate::job::{JobInfo, JobState, ListFilter, Page};
use crate::zookeeper::cache::{Known, Snapshot};
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::posting;
use crate::zookeeper::record::{JobRecord, LockBody};
use crate::zookeeper::ZooKeeperBoard;

impl ZooKeeperBoard {
    /// list: a page of the queue's jobs.
    pub(crate) async fn list_jobs(
        &self,
        queue: &str,
        filter: ListFilter,
        page: Page,
    ) -> Result<Vec<JobInfo>> {
        let paths = self.paths(queue)?;
        match filter {
            ListFilter::Live => self.list_live(&paths, None, page).await,
            ListFilter::State(s @ (JobState::Ready | JobState::Scheduled | JobState::Claimed)) => {
                self.list_live(&paths, Some(s), page).await
            }
            ListFilter::State(s @ (JobState::Completed | JobState::Cancelled)) => {
                self.list_history(&paths, s, page).await
            }
            ListFilter::State(JobState::Trashed) => self.list_trashed(&paths, page).await,
            ListFilter::State(JobState::Quarantined) => self.list_quarantined(&paths, page).await,
            ListFilter::State(JobState::Waiting) => self.list_waiting(&paths, page).await,
        }
    }

    /// Jobs on the jobs path, in claim order.
    async fn list_live(
        &self,
        paths: &QueuePaths,
        only: Option<JobState>,
        page: Page,
    ) -> Result<Vec<JobInfo>> {
        let (snap, _) = self.snapshot(paths, false).await?;
        let known = self.known(paths, &snap).await?;
        let now = self.now_ms();
        let mut jobs: Vec<(Arc<Known>, JobState)> = known
            .into_iter()
            .map(|k| {
                let state = live_state(&snap, &k, now);
                (k, state)
            })
            .filter(|(_, s)| only.is_none_or(|o| o == *s))
            .collect();
        jobs.sort_by_key(|(k, _)| (Reverse(k.priority), k.seq));
        let jobs: Vec<(Arc<Known>, JobState)> = jobs.into_iter().skip(page.offset).take(page.limit).collect();
        let what = format!("cannot list queue {}", paths.queue);
        let mut wanted = Vec::new();
        for (k, _) in &jobs {
            wanted.push(paths.record(&k.uuid));
            wanted.push(paths.lock(&k.znode));
        }
        let reads = self.read_many(&what, wanted).await?;
        let mut out = Vec::with_capacity(jobs.len());
        for ((k, state), pair) in jobs.iter().zip(reads.chunks(2)) {
            let record = pair
                .first()
                .and_then(Option::as_ref)
                .and_then(|(d, _)| JobRecord::from_bytes(d));
            let lock = pair
                .get(1)
                .and_then(Option::as_ref)
                .map(|(d, s)| (LockBody::parse(d), *s));
            // A listing is not atomic: believe the lock read now.
            let state = match (state, &lock) {
                (JobState::Claimed, None) => JobState::Ready,
                (_, Some(_)) => JobState::Claimed,
                (s, None) => *s,
            };
            let facts = Facts {
                uuid: k.uuid.clone(),
                znode: Some(k.znode.clone()),
                name: Some(k.name.clone()),
                priority: Some(k.priority.0),
                details: Some(k.details.clone()),
                book: k.book.clone(),
                ctime_ms: Some(k.ctime_ms),
                record,
                lock,
                run_at_ms: snap.scheduled_until(&k.uuid, now),
            };
            let mut info = self.info(&paths.queue, state, facts);
            info.priority = k.priority.0;
            out.push(info);
        }
        Ok(out)
    }

    /// Completed or cancelled jobs (`state`; they share the history,
    /// told apart by the entry's name), newest hour first.
    async fn list_history(&self, paths: &QueuePaths, state: JobState, page: Page) -> Result<Vec<JobInfo>> {
        let what = format!("cannot list the {state} jobs of queue {}", paths.queue);
        let mut hours: Vec<i64> = self
            .children(&what, &paths.history)
            .await?
            .iter()
            .filter_map(|h| h.parse().ok())
            .collect();
        hours.sort_unstable_by_key(|h| Reverse(*h));
        let mut uuids = Vec::new();
        for hour in hours {
            if uuids.len() >= page.offset + page.limit {
                break;
            }
            let cancelled = state == JobState::Cancelled;
            let mut bucket: Vec<String> = self
                .children(&what, &paths.history_bucket(hour))
                .await?
                .iter()
                .map(|e| paths::history_job(e))
                .filter(|(_, c)| *c == cancelled)
                .map(|(uuid, _)| uuid.to_owned())
                .collect();
            bucket.sort();
            uuids.extend(bucket);
        }
        let uuids: Vec<String> = uuids.into_iter().skip(page.offset).take(page.limit).collect();
        let records = self
            .read_many(&what, uuids.iter().map(|u| paths.record(u)).collect())
            .await?;
        let mut out = Vec::new();
        for (uuid, found) in uuids.into_iter().zip(records) {
            let record = found.and_then(|(d, _)| JobRecord::from_bytes(&d));
            let facts = Facts {
                uuid,
                znode: record.as_ref().and_then(|r| r.job.clone()),
                record,
                ..Facts::default()
            };
            out.push(self.info(&paths.queue, state, facts));
        }
        Ok(out)
    }

    /// Trashed jobs (taskflow's trash path), newest first.
    async fn list_trashed(&self, paths: &QueuePaths, page: Page) -> Result<Vec<JobInfo>> {
        let what = format!("cannot list the trash of queue {}", paths.queue);
        let mut names = self.children(&what, &paths.trash).await?;
        names.sort_by_key(|n| Reverse((paths::sequence_of(n.split('-').next().unwrap_or(n)), n.clone())));
        let names: Vec<String> = names.into_iter().skip(page.offset).take(page.limit).collect();
        let copies = self
            .read_many(&what, names.iter().map(|n| paths.trashed(n)).collect())
            .await?;
        let decoded: Vec<Option<(posting::JsonPosting, i64)>> = copies
            .into_iter()
            .map(|c| c.and_then(|(d, s)| posting::decode(&d).ok().map(|p| (p, s.ctime))))
            .collect();
        let records = self
            .read_many(
                &what,
                decoded
                    .iter()
                    .map(|d| {
                        d.as_ref()
                            .map_or_else(String::new, |(p, _)| paths.record(&p.uuid))
                    })
                    .filter(|p| !p.is_empty())
                    .collect(),
            )
            .await?;
        let mut records = records.into_iter();
        let mut out = Vec::new();
        for (name, copy) in names.into_iter().zip(decoded) {
            let Some((p, ctime)) = copy else { continue };
            let record = records
                .next()
                .flatten()
                .and_then(|(d, _)| JobRecord::from_bytes(&d));
            let mut facts = Facts {
                uuid: p.uuid.clone(),
                znode: Some(name),
                ctime_ms: Some(ctime),
                record,
                ..Facts::default()
            };
            facts.posting(p);
            out.push(self.info(&paths.queue, JobState::Trashed, facts));
        }
        Ok(out)
    }

    /// Znodes moved aside because nobody could read them.
    async fn list_quarantined(&self, paths: &QueuePaths, page: Page) -> Result<Vec<JobInfo>> {
        let what = format!("cannot list the quarantine of queue {}", paths.queue);
        let mut names: Vec<String> = self
            .children(&what, &paths.quarantine)
            .await?
            .into_iter()
            .filter(|n| !n.ends_with(".reason"))
            .collect();
        names.sort();
        let names: Vec<String> = names.into_iter().skip(page.offset).take(page.limit).collect();
        let reasons = self
            .read_many(&what, names.iter().map(|n| paths.quarantine_reason(n)).collect())
            .await?;
        Ok(names
            .into_iter()
            .zip(reasons)
            .map(|(name, reason)| {
                let reason = reason.map(|(d, _)| String::from_utf8_lossy(&d).into_owned());
                let facts = Facts {
                    uuid: name.clone(),
                    name: Some(String::new()),
                    record: Some(JobRecord {
                        reason,
                        ..JobRecord::default()
                    }),
                    znode: Some(name),
                    ..Facts::default()
                };
                self.info(&paths.queue, JobState::Quarantined, facts)
            })
            .collect())
    }
}

/// The state of a job on the jobs path, from a listing.
pub(super) fn live_state(snap: &Snapshot, k: &Known, now_ms: i64) -> JobState {
    if snap.locked.contains(&k.znode) {
        JobState::Claimed
    } else if snap.scheduled_until(&k.uuid, now_ms).is_some() {
        JobState::Scheduled
    } else {
        JobState::Ready
    }
}
