//! What a cancel reads of each job (`cancel.rs`): where it is (on the jobs
//! path or waiting for dependencies), its record as cancelled, and the
//! entries the cancel adds.

use crate::error::Result;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::record::{Ending, JobRecord, LockBody};
use crate::zookeeper::retention::hour_of;
use crate::zookeeper::ZooKeeperBoard;

/// Marks `record` cancelled at `now`.
fn cancelled(record: &mut JobRecord, now: i64) {
    record.ending = Ending::Cancelled;
    record.finished_ms = Some(now);
    record.run_at_ms = 0;
    record.log(now, "cancelled", serde_json::json!({}));
}

/// Where a job to cancel is.
pub(super) enum Place {
    /// On the jobs path: its znode and version, and its lock's version
    /// when it is claimed.
    Listed {
        znode: String,
        job_version: i32,
        lock_version: Option<i32>,
    },
    /// Waiting for dependencies: its waiting entry's version.
    Waiting { version: i32 },
}

/// What keeps a dependent from being posted unseen while a cancel commits.
#[derive(Clone, Copy)]
pub(super) enum Guard {
    /// The record's `dependents` flag is not set: the first dependent's post
    /// rewrites the record, which the cancel writes at its version.
    Unflagged,
    /// The version of the job's dependents directory.
    Version(i32),
    /// The directory is not there (proven absent in the transaction).
    Absent,
}

/// A job to cancel, as read, and the record to write.
pub(super) struct Target {
    pub(super) place: Place,
    /// The record saying cancelled, and the version to write it at
    /// (`None`: create it).
    pub(super) record: JobRecord,
    pub(super) record_version: Option<i32>,
    /// The due time of its delayed entry, to remove once cancelled.
    pub(super) delayed: Option<i64>,
    /// The history entry to create (`None`: there is one already).
    pub(super) history: Option<String>,
    /// The note telling the lock's owner, when a worker held it.
    pub(super) note: Option<String>,
    /// The check against dependents posted meanwhile.
    pub(super) dependents: Guard,
}

impl Target {
    /// The job znode, when on the jobs path.
    pub(super) fn znode(&self) -> Option<&str> {
        match &self.place {
            Place::Listed { znode, .. } => Some(znode),
            Place::Waiting { .. } => None,
        }
    }
}

impl ZooKeeperBoard {
    /// Reads the job, its lock and its record: what a cancel changes.
    /// `None` when the job is no longer on the jobs path.
    pub(super) async fn read_target(
        &self,
        paths: &QueuePaths,
        uuid: &str,
        what: &str,
    ) -> Result<Option<Target>> {
        let q = &paths.queue;
        if let Some(waiting) = self.read_waiting_target(paths, uuid, what).await? {
            return Ok(Some(waiting));
        }
        let Some(znode) = self.locate(paths, uuid).await? else {
            return Ok(None);
        };
        let now = self.now_ms();
        let history = paths.cancelled_entry(hour_of(now), uuid);
        let reads = vec![
            paths.job(&znode),
            paths.lock(&znode),
            paths.record(uuid),
            history.clone(),
        ];
        let mut reads = self.read_many(what, reads).await?.into_iter();
        let (job, lock, record) = (
            reads.next().flatten(),
            reads.next().flatten(),
            reads.next().flatten(),
        );
        // An entry of this id in this hour: it was posted again since.
        let in_history = reads.next().flatten().is_some();
        let Some((_, job_stat)) = job else {
            self.inner.cache.forget(q, &znode);
            self.inner.cache.unlocate(q, uuid);
            return Ok(None);
        };
        // A record nobody can decode is written anew at its version (it
        // would otherwise block the cancel for good).
        let (mut record, record_version) = match record {
            Some((d, stat)) => (JobRecord::from_bytes(&d).unwrap_or_default(), Some(stat.version)),
            None => (JobRecord::default(), None),
        };
        let delayed = (record.run_at_ms > 0).then_some(record.run_at_ms);
        record.job = Some(znode.clone());
        if let Some((d, stat)) = &lock {
            record.log_claim(LockBody::parse(d).owner.as_deref(), stat.czxid as u64, stat.ctime);
        }
        cancelled(&mut record, now);
        // Only jobworker's claims carry a claim id: a taskflow conductor
        // reads no notes (it learns when its consume fails).
        let note = lock
            .as_ref()
            .map(|(d, _)| LockBody::parse(d))
            .filter(|body| body.claim_id.is_some())
            .and_then(|body| body.owner)
            .filter(|o| paths::validate_owner(o).is_ok())
            .map(|o| format!("{}/{uuid}", paths::cancel_notes(self.root(), &o)));
        Ok(Some(Target {
            place: Place::Listed {
                znode,
                job_version: job_stat.version,
                lock_version: lock.map(|(_, stat)| stat.version),
            },
            record,
            record_version,
            delayed,
            history: (!in_history).then_some(history),
            note,
            dependents: Guard::Unflagged,
        }))
    }

    /// The cancel of job `uuid` while it waits for dependencies; `None`
    /// when it does not (any more).
    async fn read_waiting_target(
        &self,
        paths: &QueuePaths,
        uuid: &str,
        what: &str,
    ) -> Result<Option<Target>> {
        let now = self.now_ms();
        let history = paths.cancelled_entry(hour_of(now), uuid);
        let reads = vec![paths.record(uuid), paths.waiting_entry(uuid), history.clone()];
        let mut reads = self.read_many(what, reads).await?.into_iter();
        let (record, waiting, in_history) = (
            reads.next().flatten(),
            reads.next().flatten(),
            reads.next().flatten().is_some(),
        );
        let (Some((data, record_stat)), Some((_, waiting_stat))) = (record, waiting) else {
            return Ok(None);
        };
        let Some(mut record) = JobRecord::from_bytes(&data).filter(JobRecord::is_waiting) else {
            return Ok(None);
        };
        cancelled(&mut record, now);
        Ok(Some(Target {
            place: Place::Waiting {
                version: waiting_stat.version,
            },
            record,
            record_version: Some(record_stat.version),
            delayed: None,
            history: (!in_history).then_some(history),
            note: None,
            dependents: Guard::Unflagged,
        }))
    }
}
