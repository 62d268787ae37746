//! state, show, find_owner, list (its own file, `list`) and job_count.
//!
//! A job on the jobs path is claimed when it has a `.lock`, scheduled when
//! its record's retry time (or its delayed entry) is ahead, ready
//! otherwise; one with a waiting entry waits for dependencies (`waiting`). A job no longer there is what its record says (completed,
//! trashed); a job jobworker never finished is trashed when taskflow's
//! trash holds its copy and completed otherwise (taskflow consumed it), as
//! taskflow itself derives COMPLETE from a missing znode.

mod list;
mod overview;
mod waiting;

use zookeeper_client as zk;

use crate::codec::value_to_json;
use crate::codec::{args_of, Book};
use crate::error::{Error, Result};
use crate::job::{JobInfo, JobState};
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
        let record = match self.waiting_or_record(&paths, uuid).await? {
            Ok(waiting) => return Ok(waiting),
            Err(record) => record,
        };
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
            return self.show_unlisted(&paths, facts).await;
        };
        let what = format!("cannot read job {uuid} of queue {queue}");
        // One multi-read, a consistent snapshot: with the record read again
        // here, a claim's end landing between the first read and this one
        // cannot pair the old record with the new paths.
        let mut reads = self
            .read_many(
                &what,
                vec![
                    paths.job(&znode),
                    paths.lock(&znode),
                    paths.trashed(&znode),
                    paths.record(uuid),
                ],
            )
            .await?
            .into_iter();
        let (job, lock, trashed) = (
            reads.next().flatten(),
            reads.next().flatten(),
            reads.next().flatten(),
        );
        if let Some(Some((data, _))) = reads.next() {
            facts.record = JobRecord::from_bytes(&data).or(facts.record);
            facts.run_at_ms = facts.record.as_ref().map(|r| r.run_at_ms).filter(|at| *at > 0);
        }
        let state = match (&job, &lock) {
            (Some(_), Some(_)) => JobState::Claimed,
            (Some(_), None) if facts.run_at_ms.is_some_and(|at| at > self.now_ms()) => JobState::Scheduled,
            (Some(_), None) => JobState::Ready,
            (None, _) => match facts.record.as_ref().and_then(|r| r.ending.state()) {
                Some(state) => state,
                None if trashed.is_some() => JobState::Trashed,
                None => JobState::Completed,
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

    /// show of a job not on the jobs path, going by its record (`facts`).
    async fn show_unlisted(&self, paths: &QueuePaths, mut facts: Facts) -> Result<JobInfo> {
        let (queue, uuid) = (&paths.queue, facts.uuid.clone());
        if facts.record.as_ref().is_some_and(|r| r.ending == Ending::Live) {
            // Gone from the jobs path, and the record does not know its
            // znode: trashed by taskflow (its copy is in the trash), or
            // consumed by taskflow (it is not).
            if let Some((data, stat)) = self.find_in_trash(paths, &uuid).await? {
                facts.ctime_ms = Some(stat.ctime);
                if let Ok(p) = posting::decode(&data) {
                    facts.posting(p);
                }
                return Ok(self.info(queue, JobState::Trashed, facts));
            }
        }
        match facts.record.as_ref().map(|r| r.ending) {
            // A live record here: consumed by taskflow.
            Some(ending) => {
                let state = ending.state().unwrap_or(JobState::Completed);
                Ok(self.info(queue, state, facts))
            }
            None => Err(Error::not_found(queue, &uuid)),
        }
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
