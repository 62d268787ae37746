//! Checking a [`Lease`] and the machinery shared by the verbs that take one
//! (extend, consume, abandon and trash, each in a file of its own).
//!
//! Each first checks the lease against the lock znode, as taskflow checks
//! the owner: the lock must exist, name the lease's owner, be the very
//! lock of that claim (its creation zxid is the fencing token; token 0
//! skips this check, for claims made by taskflow), not have passed its
//! lease deadline, and not belong to a session this board lost. Then one
//! transaction deletes the lock at the version checked (see `finish`), so
//! a lease that changes in between is refused, never half-applied.

use zookeeper_client as zk;

use crate::error::{Error, ErrorKind, Result};
use crate::job::Lease;
use crate::zookeeper::finish::{Failed, Finish, How};
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::posting;
use crate::zookeeper::record::{Ending, JobRecord, LockBody};
use crate::zookeeper::tally::Tally;
use crate::zookeeper::ZooKeeperBoard;

/// Tries of a verb whose transaction lost a race (each re-checks the lease).
pub(super) const TRIES: usize = 4;

/// A lease found held, with what the ending transactions need.
pub(crate) struct Held {
    /// The job id.
    pub uuid: String,
    /// The job znode name.
    pub znode: String,
    /// The lock body.
    pub lock: LockBody,
    /// The lock's stat (version, creation zxid = token).
    pub lock_stat: zk::Stat,
    /// The posting bytes.
    pub posting: Vec<u8>,
    /// The job znode's stat.
    pub job_stat: zk::Stat,
    /// The job's record and its version, when it has one.
    pub record: Option<(JobRecord, i32)>,
}

impl Held {
    /// Since when the job was ready when this claim took it (ms).
    pub(super) fn ready_ms(&self) -> i64 {
        self.record
            .as_ref()
            .map_or(self.job_stat.ctime, |(r, _)| r.ready_since())
    }

    /// The job's record as of this lease (a new one for a job posted by
    /// taskflow), naming the job znode and this claim's token, and the
    /// version to write it at (`None`: create).
    pub(super) fn record(&self, default_max_attempts: u32) -> (JobRecord, Option<i32>) {
        let (mut record, version) = match &self.record {
            Some((r, v)) => (r.clone(), Some(*v)),
            None => {
                let p = posting::decode(&self.posting).ok();
                let record = JobRecord {
                    name: p.as_ref().map(|p| p.name.clone()).unwrap_or_default(),
                    priority: p.map(|p| p.priority.0).unwrap_or(0),
                    max_attempts: default_max_attempts,
                    posted_ms: self.job_stat.ctime,
                    ..JobRecord::default()
                };
                (record, None)
            }
        };
        record.job = Some(self.znode.clone());
        record.token = self.lock_stat.czxid as u64;
        record.log_claim(self.lock.owner.as_deref(), record.token, self.lock_stat.ctime);
        (record, version)
    }
}

/// The error for a lease on a job no longer on the jobs path: cancelled
/// when its record says so (the worker then drops its result), else not
/// found.
fn gone(queue: &str, uuid: &str, record: Option<&JobRecord>) -> Error {
    match record.map(|r| r.ending) {
        Some(Ending::Cancelled) => Error::cancelled(queue, uuid),
        _ => Error::not_found(queue, uuid),
    }
}

fn refused(lease: &Lease, why: String) -> Error {
    Error::new(
        ErrorKind::NotOwner { owner: None },
        format!(
            "lease on job {} in queue {} is not held by {}: {why}",
            lease.job(),
            lease.queue(),
            lease.owner()
        ),
    )
}

impl ZooKeeperBoard {
    /// Checks that `lease` is held (see the module docs).
    pub(crate) async fn held(&self, paths: &QueuePaths, lease: &Lease) -> Result<Held> {
        let (q, uuid, who) = (&paths.queue, lease.job().as_str(), lease.owner());
        // The queue may have been made by taskflow, without jobworker's dirs.
        self.ensure_queue(paths).await?;
        let Some(znode) = self.locate(paths, uuid).await? else {
            let record = self.read_record(paths, uuid).await?.map(|(r, _)| r);
            return Err(gone(q, uuid, record.as_ref()));
        };
        let what = format!("cannot check the lease on job {uuid} in queue {q}");
        let mut reads = self
            .read_many(
                &what,
                vec![paths.lock(&znode), paths.job(&znode), paths.record(uuid)],
            )
            .await?
            .into_iter();
        let (lock, job, record) = (
            reads.next().flatten(),
            reads.next().flatten(),
            reads.next().flatten(),
        );
        // A record naming a znode of another job (the jobs path was made
        // again since) does not count.
        let ours = |data: &[u8]| posting::decode(data).map(|p| p.uuid == uuid).unwrap_or(true);
        let Some((posting, job_stat)) = job.filter(|(data, _)| ours(data)) else {
            self.inner.cache.forget(q, &znode);
            self.inner.cache.unlocate(q, uuid);
            let record = record.and_then(|(data, _)| JobRecord::from_bytes(&data));
            return Err(gone(q, uuid, record.as_ref()));
        };
        let Some((lock_data, lock_stat)) = lock else {
            return Err(Error::not_owner(q, uuid, who, None));
        };
        let body = LockBody::parse(&lock_data);
        if body.owner.as_deref() != Some(who) {
            return Err(Error::not_owner(q, uuid, who, body.owner.as_deref()));
        }
        if lease.token() != 0 && lock_stat.czxid as u64 != lease.token() {
            return Err(Error::new(
                ErrorKind::NotOwner {
                    owner: body.owner.clone(),
                },
                format!(
                    "lease on job {uuid} in queue {q} is stale: token {} was replaced by a newer claim \
                     (token {}) of {who}",
                    lease.token(),
                    lock_stat.czxid
                ),
            ));
        }
        if self.session().was_lost(lock_stat.ephemeral_owner) {
            return Err(refused(
                lease,
                "the zookeeper session that claimed it has ended".into(),
            ));
        }
        let now = self.now_ms();
        if let Some(deadline) = body.deadline_ms.filter(|d| *d <= now) {
            return Err(refused(lease, format!("it expired {} ms ago", now - deadline)));
        }
        let record = record.and_then(|(data, stat)| JobRecord::from_bytes(&data).map(|r| (r, stat.version)));
        Ok(Held {
            uuid: uuid.to_owned(),
            znode,
            lock: body,
            lock_stat,
            posting,
            job_stat,
            record,
        })
    }

    /// Commits the end of a held claim.
    pub(super) async fn end_claim(
        &self,
        paths: &QueuePaths,
        held: &Held,
        record: JobRecord,
        record_version: Option<i32>,
        how: &How,
        what: &str,
    ) -> Result<Ended> {
        let attempts_before = held.record.as_ref().map_or(0, |(r, _)| r.attempts);
        let counted = how.counted(record.attempts > attempts_before);
        let finish = Finish {
            paths,
            znode: &held.znode,
            uuid: &held.uuid,
            lock_version: held.lock_stat.version,
            job_version: held.job_stat.version,
            tally: Tally::ended(held.ready_ms(), held.lock_stat.ctime, self.now_ms(), counted),
            record,
            record_version,
            drop_record: false,
        };
        let client = self.client(what).await?;
        match self.finish(&client, &finish, how).await {
            Ok(()) => {}
            Err(Failed::Refused(e)) => return Err(self.session().error(what, &e)),
            Err(Failed::DelayedTaken) => {
                // An entry for this very time exists: the job is scheduled
                // then anyway; drop it and write ours again.
                if let How::Release {
                    delayed: Some(at), ..
                } = how
                {
                    let _ = client.delete(&paths.delayed_entry(finish.uuid, *at), None).await;
                }
                return Ok(Ended::Retry);
            }
            Err(Failed::TrashTaken) => return Ok(Ended::TrashTaken),
            Err(Failed::NoParent) => {
                self.remake(paths).await?;
                return Ok(Ended::Retry);
            }
            Err(Failed::Unknown(e)) => {
                tracing::warn!(job = %held.uuid, queue = %paths.queue, error = %e, "{what}: outcome unknown; checking");
                if !self.landed(&finish, held, how).await? {
                    return Ok(Ended::Retry);
                }
            }
            Err(_) => return Ok(Ended::Retry),
        }
        match how {
            How::Release { delayed, .. } => {
                // Our lease is over: a lock seen there later is another one.
                self.inner.cache.unlock(&paths.queue, &held.znode);
                self.drop_stale_delay(paths, held, *delayed);
            }
            _ => {
                self.inner.cache.forget(&paths.queue, &held.znode);
                self.drop_stale_delay(paths, held, None);
            }
        }
        Ok(Ended::Done)
    }

    /// A job claimed by name while scheduled still has its delayed entry:
    /// once its claim ended, the entry goes unless it is the new one
    /// (`keep`), in the background (a stale entry only delays the job until
    /// its time).
    pub(super) fn drop_stale_delay(&self, paths: &QueuePaths, held: &Held, keep: Option<i64>) {
        let old = held.record.as_ref().map(|(r, _)| r.run_at_ms);
        let Some(at) = old.filter(|at| *at > self.now_ms() && Some(*at) != keep) else {
            return;
        };
        if let Some(client) = self.session().current() {
            let delete = client.delete(&paths.delayed_entry(&held.uuid, at), None);
            self.session().runtime().spawn(async move {
                let _ = delete.await;
            });
        }
    }

    /// After an unknown outcome: true when the transaction `f` (ending
    /// the claim checked in `held`, `how`) landed. The lock checked must be
    /// gone, the record must read as `f` wrote it (or be gone when `f`
    /// dropped it), and a consume or trash must have deleted the job znode.
    /// A missing lock alone proves nothing (the lease may have expired and
    /// been recovered, or the session lost): when this says false, the
    /// caller checks the lease again, which reports how it was lost.
    pub(super) async fn landed(&self, f: &Finish<'_>, held: &Held, how: &How) -> Result<bool> {
        let paths = f.paths;
        let what = format!("cannot check job {} of queue {}", held.uuid, paths.queue);
        let mut reads = self
            .read_many(
                &what,
                vec![
                    paths.lock(&held.znode),
                    paths.job(&held.znode),
                    paths.record(&held.uuid),
                ],
            )
            .await?
            .into_iter();
        let (lock, job, record) = (
            reads.next().flatten(),
            reads.next().flatten(),
            reads.next().flatten(),
        );
        if lock.is_some_and(|(_, stat)| stat.czxid == held.lock_stat.czxid) {
            return Ok(false);
        }
        if !matches!(how, How::Release { .. }) && job.is_some() {
            return Ok(false);
        }
        Ok(match record {
            None => f.drop_record,
            Some((data, _)) => !f.drop_record && JobRecord::from_bytes(&data).as_ref() == Some(&f.record),
        })
    }

    pub(super) fn keeps_changing(&self, what: &str) -> Error {
        Error::unavailable(format!("{what}: the job keeps changing under us; try again"))
    }
}

/// What committing the end of a claim did.
pub(super) enum Ended {
    /// Committed.
    Done,
    /// Check the lease again and retry.
    Retry,
    /// The trash copy's name is taken: retry with another.
    TrashTaken,
}

/// The trash copy's name: the job znode's, or with the lock's zxid when a
/// copy of that name is already there (the jobs path was made again).
pub(super) fn trash_name(held: &Held, suffixed: bool) -> String {
    if suffixed {
        format!("{}-{}", held.znode, held.lock_stat.czxid)
    } else {
        held.znode.clone()
    }
}
