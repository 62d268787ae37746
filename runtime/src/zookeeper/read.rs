//! state, show, find_owner, list and job_count.
//!
//! A job on the jobs path is claimed when it has a `.lock`, scheduled when
//! its record's retry time (or its delayed entry) is ahead, ready
//! otherwise. A job no longer there is what its record says (completed,
//! trashed); a job jobworker never finished is trashed when taskflow's
//! trash holds its copy and completed otherwise (taskflow consumed it), as
//! taskflow itself derives COMPLETE from a missing znode.

use std::cmp::Reverse;
use std::sync::Arc;

use zookeeper_client as zk;

use crate::codec::value_to_json;
use crate::codec::{args_of, Book};
use crate::error::{Error, Result};
use crate::job::{JobInfo, JobState, ListFilter, Page};
use crate::zookeeper::cache::{Known, Snapshot};
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::posting;
use crate::zookeeper::record::{Ending, JobRecord, LockBody};
use crate::zookeeper::ZooKeeperBoard;

/// Everything gathered about one job.
#[derive(Default)]
struct Facts {
    uuid: String,
    znode: Option<String>,
    name: Option<String>,
    priority: Option<i32>,
    details: Option<rmpv::Value>,
    book: Option<Book>,
    ctime_ms: Option<i64>,
    record: Option<JobRecord>,
    lock: Option<(LockBody, zk::Stat)>,
    run_at_ms: Option<i64>,
}

impl Facts {
    /// What the posting says.
    fn posting(&mut self, p: posting::JsonPosting) {
        self.name = Some(p.name);
        self.priority = Some(p.priority.0);
        self.details = Some(p.details);
        self.book = p.book;
    }
}

/// ISO 8601 of a znode time, naive UTC as taskflow writes `created_on`.
fn iso(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.naive_utc().format("%Y-%m-%dT%H:%M:%S%.6f").to_string())
}

impl ZooKeeperBoard {
    fn info(&self, queue: &str, state: JobState, f: Facts) -> JobInfo {
        // jobworker's record has the exact priority; else the posting's.
        let priority = f.record.as_ref().map(|r| r.priority).or(f.priority).unwrap_or(0);
        let record = f.record.unwrap_or_default();
        let (owner, token, deadline) = match &f.lock {
            Some((body, stat)) if state == JobState::Claimed => {
                (body.owner.clone(), stat.czxid as u64, body.deadline_ms)
            }
            _ => (None, record.token, None),
        };
        let name = f.name.unwrap_or_else(|| record.name.clone());
        JobInfo {
            id: f.uuid,
            queue: queue.to_owned(),
            name,
            state,
            priority,
            owner,
            attempts: record.attempts,
            max_attempts: match record.max_attempts {
                0 => self.inner.opts.default_max_attempts,
                n => n,
            },
            token,
            expires_in_ms: deadline.map(|d| (d - self.now_ms()).max(0)),
            run_at_ms: f.run_at_ms.filter(|_| state == JobState::Scheduled),
            sequence: f.znode.as_deref().and_then(paths::sequence_of),
            created_on: f.ctime_ms.and_then(iso),
            // taskflow's is the job znode's mtime; job znodes are never
            // rewritten, so it is their ctime.
            last_modified: f.ctime_ms.and_then(iso),
            reason: record.reason,
            group: record.group,
            tags: record.tags,
            args: f
                .details
                .as_ref()
                .map(|d| value_to_json(&args_of(d)))
                .unwrap_or(serde_json::Value::Null),
            details: f
                .details
                .as_ref()
                .map(value_to_json)
                .unwrap_or(serde_json::Value::Null),
            book: f.book,
        }
    }

    /// show: everything about job `uuid`.
    pub(crate) async fn show_job(&self, queue: &str, uuid: &str) -> Result<JobInfo> {
        let paths = self.paths(queue)?;
        let record = self.read_record(&paths, uuid).await?.map(|(r, _)| r);
        let finished = record.as_ref().is_some_and(|r| r.ending != Ending::Live);
        let znode = match (
            self.inner.cache.znode_of(queue, uuid),
            record.as_ref().and_then(|r| r.job.clone()),
        ) {
            (Some(z), _) | (None, Some(z)) => Some(z),
            (None, None) if finished => None,
            (None, None) => self.locate(&paths, uuid).await?,
        };
        let mut facts = Facts {
            uuid: uuid.to_owned(),
            znode: znode.clone(),
            run_at_ms: record.as_ref().map(|r| r.run_at_ms).filter(|at| *at > 0),
            record,
            ..Facts::default()
        };
        let Some(znode) = znode else {
            if facts.record.as_ref().is_some_and(|r| r.ending == Ending::Live) {
                // Gone from the jobs path, and the record does not know its
                // znode: trashed by taskflow (its copy is in the trash), or
                // consumed by taskflow (it is not).
                if let Some((data, stat)) = self.find_in_trash(&paths, uuid).await? {
                    facts.ctime_ms = Some(stat.ctime);
                    if let Ok(p) = posting::decode(&data) {
                        facts.posting(p);
                    }
                    return Ok(self.info(queue, JobState::Trashed, facts));
                }
            }
            return match facts.record.as_ref().map(|r| r.ending) {
                Some(Ending::Trashed) => Ok(self.info(queue, JobState::Trashed, facts)),
                Some(_) => Ok(self.info(queue, JobState::Completed, facts)),
                None => Err(Error::not_found(queue, uuid)),
            };
        };
        let what = format!("cannot read job {uuid} of queue {queue}");
        let mut reads = self
            .read_many(
                &what,
                vec![paths.job(&znode), paths.lock(&znode), paths.trashed(&znode)],
            )
            .await?
            .into_iter();
        let (job, lock, trashed) = (
            reads.next().flatten(),
            reads.next().flatten(),
            reads.next().flatten(),
        );
        let state = match (&job, &lock) {
            (Some(_), Some(_)) => JobState::Claimed,
            (Some(_), None) if facts.run_at_ms.is_some_and(|at| at > self.now_ms()) => JobState::Scheduled,
            (Some(_), None) => JobState::Ready,
            (None, _) => match facts.record.as_ref().map(|r| r.ending) {
                Some(Ending::Completed) => JobState::Completed,
                Some(Ending::Trashed) => JobState::Trashed,
                _ if trashed.is_some() => JobState::Trashed,
                _ => JobState::Completed,
            },
        };
        let source = job
            .as_ref()
            .or(trashed.as_ref().filter(|_| state == JobState::Trashed));
        if let Some((data, stat)) = source {
            if let Ok(p) = posting::decode(data) {
                if p.uuid != uuid {
                    // A record naming another job's znode (an old id): none of ours.
                    return Err(Error::not_found(queue, uuid));
                }
                facts.posting(p);
            }
            facts.ctime_ms = job.as_ref().map(|(_, s)| s.ctime).or(Some(stat.ctime));
        }
        facts.lock = lock.map(|(data, stat)| (LockBody::parse(&data), stat));
        Ok(self.info(queue, state, facts))
    }

    /// The trash copy of job `uuid`, found by reading the queue's trash (a
    /// rare path: only for a job whose record lacks its znode name).
    async fn find_in_trash(&self, paths: &QueuePaths, uuid: &str) -> Result<Option<(Vec<u8>, zk::Stat)>> {
        let what = format!("cannot read the trash of queue {}", paths.queue);
        let names = self.children(&what, &paths.trash).await?;
        let copies = self
            .read_many(&what, names.iter().map(|n| paths.trashed(n)).collect())
            .await?;
        Ok(copies
            .into_iter()
            .flatten()
            .find(|(data, _)| posting::decode(data).is_ok_and(|p| p.uuid == uuid)))
    }

    /// find_owner: taskflow's (`sync` then read the lock's `owner`).
    pub(crate) async fn find_owner_of(&self, queue: &str, uuid: &str) -> Result<Option<String>> {
        let paths = self.paths(queue)?;
        let Some(znode) = self.locate(&paths, uuid).await? else {
            return Ok(None);
        };
        let what = format!("cannot find the owner of job {uuid} in queue {queue}");
        let lock = paths.lock(&znode);
        let read = self
            .read(&what, |client| {
                let lock = lock.clone();
                async move {
                    client.sync(&lock).await?;
                    client.get_data(&lock).await
                }
            })
            .await?;
        match read {
            Ok((data, _)) => Ok(LockBody::parse(&data).owner),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(self.session().error(&what, &e)),
        }
    }

    /// job_count: job znodes on the jobs path, as taskflow counts them.
    pub(crate) async fn count_jobs(&self, queue: &str) -> Result<usize> {
        let paths = self.paths(queue)?;
        let what = format!("cannot count the jobs of queue {queue}");
        let jobs = paths.jobs.clone();
        let listed = self
            .read(&what, |client| {
                let jobs = jobs.clone();
                async move { client.list_children(&jobs).await }
            })
            .await?;
        match listed {
            Ok(children) => Ok(children.iter().filter(|c| paths::is_job_name(c)).count()),
            Err(zk::Error::NoNode) => Ok(0),
            Err(e) => Err(self.session().error(&what, &e)),
        }
    }

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
            ListFilter::State(JobState::Completed) => self.list_completed(&paths, page).await,
            ListFilter::State(JobState::Trashed) => self.list_trashed(&paths, page).await,
            ListFilter::State(JobState::Quarantined) => self.list_quarantined(&paths, page).await,
            // No dependencies or cancel on ZooKeeper: never in these states.
            ListFilter::State(JobState::Waiting | JobState::Cancelled) => Ok(Vec::new()),
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

    /// Completed jobs, newest hour first.
    async fn list_completed(&self, paths: &QueuePaths, page: Page) -> Result<Vec<JobInfo>> {
        let what = format!("cannot list the completed jobs of queue {}", paths.queue);
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
            let mut bucket = self.children(&what, &paths.history_bucket(hour)).await?;
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
            out.push(self.info(&paths.queue, JobState::Completed, facts));
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

    /// The children of `path` (none when it does not exist).
    pub(crate) async fn children(&self, what: &str, path: &str) -> Result<Vec<String>> {
        let read = self
            .read(what, |client| {
                let path = path.to_owned();
                async move { client.list_children(&path).await }
            })
            .await?;
        match read {
            Ok(c) => Ok(c),
            Err(zk::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(self.session().error(what, &e)),
        }
    }
}

/// The state of a job on the jobs path, from a listing.
fn live_state(snap: &Snapshot, k: &Known, now_ms: i64) -> JobState {
    if snap.locked.contains(&k.znode) {
        JobState::Claimed
    } else if snap.scheduled_until(&k.uuid, now_ms).is_some() {
        JobState::Scheduled
    } else {
        JobState::Ready
    }
}
