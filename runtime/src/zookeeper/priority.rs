//! Priority changes on ZooKeeper. Claims order jobs by the priority their
//! posting names (refined by the record beyond ±2, see `cache/fetch.rs`),
//! and every board caches postings by znode name. So a change rewrites
//! the posting's `"priority"` (nothing else of it) and the record, in one
//! transaction at the versions read:
//!
//! - a job that waits (ready or scheduled) moves: its job znode is
//!   deleted, its lock proven absent (created and deleted in the same
//!   transaction), and a new job znode made with the new posting. Every
//!   board sees a new znode and reads it, so the new order holds at once
//!   everywhere; the job goes to the end of its new priority's line (a new
//!   sequence), where Redis keeps its place among equals.
//! - a claimed job keeps its znode (its lock names it); the posting is
//!   rewritten in place, and the new priority orders it once it is ready
//!   again (a board that cached the old posting reads it anew when its
//!   claim of the old version fails).
//! - a job waiting for dependencies has its waiting posting rewritten; its
//!   release makes the job znode with it.

use rmpv::Value;
use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::job::{JobId, JobState, Priority};
use crate::zookeeper::lease::TRIES;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::post::created_job;
use crate::zookeeper::posting;
use crate::zookeeper::record::JobRecord;
use crate::zookeeper::session::{is_definite, lost_a_race, source};
use crate::zookeeper::{json, ZooKeeperBoard};

/// `posting` with its `"priority"` set to `priority`'s taskflow name, every
/// other key kept as it was; `None` when it is not a JSON object.
fn with_priority(posting: &[u8], priority: Priority) -> Option<Vec<u8>> {
    let Value::Map(mut entries) = json::loads(posting).ok()? else {
        return None;
    };
    let name = Value::from(priority.taskflow_name());
    match entries.iter_mut().find(|(k, _)| k.as_str() == Some("priority")) {
        Some((_, v)) => *v = name,
        None => entries.push((Value::from("priority"), name)),
    }
    json::dumps(&Value::Map(entries)).ok().map(String::into_bytes)
}

/// What a priority change of a job waiting for dependencies did.
enum Waiting {
    /// Changed.
    Changed,
    /// Something changed meanwhile: read again.
    Raced,
    /// The job does not wait for dependencies.
    Not,
}

/// What a priority change reads of its job.
struct Read {
    znode: String,
    job: (Vec<u8>, zk::Stat),
    claimed: bool,
    record: JobRecord,
    record_version: Option<i32>,
}

impl ZooKeeperBoard {
    /// Changes the priority of job `job` (see the module docs); returns its
    /// state.
    pub(crate) async fn change_priority(
        &self,
        queue: &str,
        job: &JobId,
        priority: Priority,
    ) -> Result<JobState> {
        let priority = priority.validated()?;
        let paths = self.paths(queue)?;
        let uuid = job.as_str();
        let what = format!("cannot change the priority of job {uuid} in queue {queue}");
        for _ in 0..TRIES {
            match self.waiting_priority(&paths, uuid, priority, &what).await? {
                Waiting::Changed => return Ok(JobState::Waiting),
                Waiting::Raced => continue,
                Waiting::Not => {}
            }
            let Some(read) = self.read_for_priority(&paths, uuid, &what).await? else {
                let state = self.show_job(queue, uuid).await?.state;
                return Err(Error::finished(queue, uuid, &state.to_string()));
            };
            if let Some(state) = self.commit_priority(&paths, uuid, read, priority, &what).await? {
                return Ok(state);
            }
        }
        Err(self.keeps_changing(&what))
    }

    /// Changes the priority of job `uuid` if it waits for dependencies:
    /// its waiting posting and its record, at the versions read.
    async fn waiting_priority(
        &self,
        paths: &QueuePaths,
        uuid: &str,
        priority: Priority,
        what: &str,
    ) -> Result<Waiting> {
        let reads = vec![paths.record(uuid), paths.waiting_entry(uuid)];
        let mut reads = self.read_many(what, reads).await?.into_iter();
        let (Some((data, record_stat)), Some((posting, waiting_stat))) =
            (reads.next().flatten(), reads.next().flatten())
        else {
            return Ok(Waiting::Not);
        };
        let Some(mut record) = JobRecord::from_bytes(&data).filter(JobRecord::is_waiting) else {
            return Ok(Waiting::Not);
        };
        let Some(posting) = with_priority(&posting, priority) else {
            return Err(Error::codec(format!("{what}: its posting is not a json object")));
        };
        record.priority = priority.0;
        record.log(
            self.now_ms(),
            "priority",
            serde_json::json!({ "priority": priority.0 }),
        );
        let client = self.client(what).await?;
        let mut w = client.new_multi_writer();
        w.add_set_data(&paths.waiting_entry(uuid), &posting, Some(waiting_stat.version))
            .and_then(|_| w.add_set_data(&paths.record(uuid), &record.to_bytes(), Some(record_stat.version)))
            .map_err(|e| self.session().error(what, &e))?;
        match w.commit().await {
            Ok(_) => {
                self.emit(&paths.queue, uuid, &record.fresh);
                Ok(Waiting::Changed)
            }
            Err(e) if is_definite(source(&e)) && !lost_a_race(&e) => {
                Err(self.session().error(what, source(&e)))
            }
            // Released, cancelled or changed meanwhile (or the answer was
            // lost): read again.
            Err(_) => Ok(Waiting::Raced),
        }
    }

    /// The job, whether it is claimed, and its record; `None` when it left
    /// the jobs path.
    async fn read_for_priority(&self, paths: &QueuePaths, uuid: &str, what: &str) -> Result<Option<Read>> {
        let Some(znode) = self.locate(paths, uuid).await? else {
            return Ok(None);
        };
        let reads = vec![paths.job(&znode), paths.lock(&znode), paths.record(uuid)];
        let mut reads = self.read_many(what, reads).await?.into_iter();
        let (job, lock, record) = (
            reads.next().flatten(),
            reads.next().flatten(),
            reads.next().flatten(),
        );
        let Some(job) = job else {
            self.inner.cache.forget(&paths.queue, &znode);
            self.inner.cache.unlocate(&paths.queue, uuid);
            return Ok(None);
        };
        let (record, record_version) = match record {
            Some((data, stat)) => (
                JobRecord::from_bytes(&data).unwrap_or_default(),
                Some(stat.version),
            ),
            None => (JobRecord::default(), None),
        };
        Ok(Some(Read {
            znode,
            job,
            claimed: lock.is_some(),
            record,
            record_version,
        }))
    }

    /// One try: `None` when something changed meanwhile (read again).
    async fn commit_priority(
        &self,
        paths: &QueuePaths,
        uuid: &str,
        mut read: Read,
        priority: Priority,
        what: &str,
    ) -> Result<Option<JobState>> {
        let Some(posting) = with_priority(&read.job.0, priority) else {
            return Err(Error::codec(format!("{what}: its posting is not a json object")));
        };
        if read.record_version.is_none() {
            // Posted by taskflow and not indexed yet: its first record.
            read.record.name = posting::decode(&read.job.0).map(|p| p.name).unwrap_or_default();
            read.record.max_attempts = self.inner.opts.default_max_attempts;
            read.record.posted_ms = read.job.1.ctime;
        }
        read.record.priority = priority.0;
        let now = self.now_ms();
        read.record
            .log(now, "priority", serde_json::json!({ "priority": priority.0 }));
        read.record.job = (read.claimed).then(|| read.znode.clone());
        let client = self.client(what).await?;
        let access = self.session().access();
        let persistent = &access.persistent();
        let lock = paths.lock(&read.znode);
        let mut w = client.new_multi_writer();
        let staged = if read.claimed {
            w.add_set_data(&paths.job(&read.znode), &posting, Some(read.job.1.version))
        } else {
            w.add_create(&lock, b"", persistent)
                .and_then(|_| w.add_delete(&lock, None))
                .and_then(|_| w.add_delete(&paths.job(&read.znode), Some(read.job.1.version)))
        }
        .and_then(|_| match read.record_version {
            Some(v) => w.add_set_data(&paths.record(uuid), &read.record.to_bytes(), Some(v)),
            None => w.add_create(&paths.record(uuid), &read.record.to_bytes(), persistent),
        })
        .and_then(|_| match read.claimed {
            true => Ok(()),
            false => {
                let job = format!("{}/{}", paths.jobs, paths::JOB_PREFIX);
                w.add_create(&job, &posting, &access.sequential())
            }
        });
        staged.map_err(|e| self.session().error(what, &e))?;
        match w.commit().await {
            Ok(results) => {
                self.emit(&paths.queue, uuid, &read.record.fresh);
                self.inner.cache.forget(&paths.queue, &read.znode);
                self.inner.cache.unlocate(&paths.queue, uuid);
                if let Some(znode) = created_job(results) {
                    self.name_znode(paths, uuid, &read.record, read.record_version, &znode)
                        .await;
                }
                Ok(Some(self.waiting_state(&read)))
            }
            Err(e) if lost_a_race(&e) => Ok(None),
            Err(e) if is_definite(source(&e)) => Err(self.session().error(what, source(&e))),
            // The answer was lost: the next read tells (a moved job is
            // found anew; a change made twice is the same change).
            Err(_) => Ok(None),
        }
    }

    /// The state a changed job is in: claimed, scheduled or ready.
    fn waiting_state(&self, read: &Read) -> JobState {
        if read.claimed {
            JobState::Claimed
        } else if read.record.run_at_ms > self.now_ms() {
            JobState::Scheduled
        } else {
            JobState::Ready
        }
    }

    /// Writes a moved job's new znode name into its record (best effort:
    /// without it, a later lookup scans).
    pub(crate) async fn name_znode(
        &self,
        paths: &QueuePaths,
        uuid: &str,
        record: &JobRecord,
        version: Option<i32>,
        znode: &str,
    ) {
        self.inner.cache.located(&paths.queue, uuid, znode);
        let mut named = record.clone();
        named.job = Some(znode.to_owned());
        let version = version.map_or(0, |v| v.wrapping_add(1));
        if let Some(client) = self.session().current() {
            let _ = client
                .set_data(&paths.record(uuid), &named.to_bytes(), Some(version))
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_priority_of_a_posting_changes() {
        let posting =
            br#"{"uuid": "u1", "name": "n", "priority": "NORMAL", "details": {"a": 1}, "extra": [1]}"#;
        let changed = with_priority(posting, Priority::VERY_HIGH).unwrap();
        assert_eq!(
            String::from_utf8(changed).unwrap(),
            r#"{"uuid": "u1", "name": "n", "priority": "VERY_HIGH", "details": {"a": 1}, "extra": [1]}"#
        );
        let none = with_priority(br#"{"uuid": "u2"}"#, Priority::LOW).unwrap();
        assert!(String::from_utf8(none)
            .unwrap()
            .ends_with(r#""priority": "LOW"}"#));
        assert_eq!(with_priority(b"[1]", Priority::LOW), None);
    }
}
