//! The transactions that end a claim: consume, abandon (release or retry),
//! trash, and the recovery of an expired lease. Each is one multi-op
//! transaction, taskflow's ops first (delete the lock at the version read,
//! delete the job znode, copy the posting to the trash) plus jobworker's
//! record, its delayed or history entry and a tally entry for the
//! statistics (`tally.rs`), so a failed check changes nothing.

use zookeeper_client as zk;

use crate::zookeeper::access::Access;
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::record::JobRecord;
use crate::zookeeper::session::{failed_op, is_definite, source};
use crate::zookeeper::tally::{Counted, Tally};
use crate::zookeeper::ZooKeeperBoard;

/// How a claim ends.
#[derive(Debug, Clone)]
pub(crate) enum How {
    /// The lock goes, the job stays (ready, or scheduled until `delayed`).
    Release {
        /// Due time of a delayed entry to create.
        delayed: Option<i64>,
        /// Mark the job a suspect (its worker died holding several).
        suspect: bool,
    },
    /// Lock and job go; a history entry in bucket `history` when given;
    /// an owed entry when the job has dependents (`deps.rs`).
    Consume {
        /// The history bucket (hour) of the entry to create.
        history: Option<i64>,
        /// Create the job's owed entry.
        owed: bool,
    },
    /// Lock and job go; the posting is copied to the trash as `trash_name`.
    Trash {
        /// The posting bytes (copied verbatim).
        posting: Vec<u8>,
        /// The trash copy's name (the job znode's name unless taken).
        trash_name: String,
    },
}

impl How {
    /// The lock goes, the job is ready again, a suspect or not.
    pub(crate) fn back(suspect: bool) -> How {
        How::Release {
            delayed: None,
            suspect,
        }
    }

    /// The lock goes, the job stays: ready, or scheduled until `delayed`.
    pub(crate) fn release(delayed: Option<i64>) -> How {
        How::Release {
            delayed,
            suspect: false,
        }
    }

    /// What ending so counts in the statistics: a trash a failure, a
    /// consume a completion, a release after a `failed_try` a retry.
    pub(crate) fn counted(&self, failed_try: bool) -> Counted {
        match self {
            How::Trash { .. } => Counted::Failed,
            How::Consume { .. } => Counted::Completed,
            How::Release { .. } if failed_try => Counted::Retried,
            How::Release { .. } => Counted::Nothing,
        }
    }
}

/// One ending transaction.
#[derive(Debug, Clone)]
pub(crate) struct Finish<'p> {
    pub paths: &'p QueuePaths,
    /// The job znode name.
    pub znode: &'p str,
    /// The job id.
    pub uuid: &'p str,
    /// The lock's version when it was checked.
    pub lock_version: i32,
    /// The job znode's version.
    pub job_version: i32,
    /// The record to write.
    pub record: JobRecord,
    /// The record's version (`None`: create it).
    pub record_version: Option<i32>,
    /// Delete the record instead of writing it (consume without history).
    pub drop_record: bool,
    /// What the end adds to the statistics.
    pub tally: Tally,
}

/// Why an ending transaction failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failed {
    /// The lock is gone or changed: the lease is not held as checked.
    Lock,
    /// The job znode is gone or changed.
    Job,
    /// The record changed (someone counted an attempt): read it again.
    Record,
    /// The trash copy's name is taken.
    TrashTaken,
    /// The history bucket does not exist yet.
    NoBucket,
    /// A directory of jobworker's is missing (a queue made by taskflow).
    NoParent,
    /// A history entry of that id exists in the bucket.
    HistoryTaken,
    /// A delayed entry of that id and time exists.
    DelayedTaken,
    /// An owed entry of that id exists (an earlier job of the id still
    /// owes releases).
    OwedTaken,
    /// The job is a suspect already.
    SuspectTaken,
    /// The server refused the request for another reason.
    Refused(zk::Error),
    /// The outcome is unknown (connection lost mid-request).
    Unknown(zk::Error),
}

impl ZooKeeperBoard {
    /// Commits `f` ended `how`.
    pub(crate) async fn finish(&self, client: &zk::Client, f: &Finish<'_>, how: &How) -> Result<(), Failed> {
        let mut w = client.new_multi_writer();
        let mut kinds = Vec::new();
        stage(&mut w, &mut kinds, f, how, self.session().access()).map_err(Failed::Refused)?;
        match w.commit().await {
            Ok(_) => {
                self.tallied(f.paths);
                self.emit(&f.paths.queue, f.uuid, &f.record.fresh);
                Ok(())
            }
            Err(e) => Err(match failed_op(&e) {
                Some((i, err)) => match (kinds.get(i), err) {
                    (Some(Failed::HistoryTaken), zk::Error::NoNode) => Failed::NoBucket,
                    (Some(Failed::Record), zk::Error::NoNode) if f.record_version.is_none() => {
                        Failed::NoParent
                    }
                    (
                        Some(
                            Failed::DelayedTaken
                            | Failed::TrashTaken
                            | Failed::NoParent
                            | Failed::OwedTaken
                            | Failed::SuspectTaken,
                        ),
                        zk::Error::NoNode,
                    ) => Failed::NoParent,
                    (
                        Some(Failed::Record),
                        zk::Error::NoNode | zk::Error::NodeExists | zk::Error::BadVersion,
                    ) => Failed::Record,
                    (Some(Failed::Lock | Failed::Job), zk::Error::NoNode | zk::Error::BadVersion) => {
                        kinds[i].clone()
                    }
                    (
                        Some(
                            kind @ (Failed::TrashTaken
                            | Failed::HistoryTaken
                            | Failed::DelayedTaken
                            | Failed::OwedTaken
                            | Failed::SuspectTaken),
                        ),
                        zk::Error::NodeExists,
                    ) => kind.clone(),
                    _ => Failed::Refused(err.clone()),
                },
                None if is_definite(source(&e)) => Failed::Refused(source(&e).clone()),
                None => Failed::Unknown(source(&e).clone()),
            }),
        }
    }
}

/// Adds the ops of `f` ended `how` to `w`, and in `kinds` what the failure
/// of each op would mean.
fn stage(
    w: &mut zk::MultiWriter<'_>,
    kinds: &mut Vec<Failed>,
    f: &Finish<'_>,
    how: &How,
    access: &Access,
) -> Result<(), zk::Error> {
    let p = f.paths;
    let persistent = &access.persistent();
    if let How::Trash { posting, trash_name } = how {
        w.add_create(&p.trashed(trash_name), posting, persistent)?;
        kinds.push(Failed::TrashTaken);
    }
    w.add_delete(&p.lock(f.znode), Some(f.lock_version))?;
    kinds.push(Failed::Lock);
    if !matches!(how, How::Release { .. }) {
        w.add_delete(&p.job(f.znode), Some(f.job_version))?;
        kinds.push(Failed::Job);
    }
    let path = p.record(f.uuid);
    let record = f.record.to_bytes();
    match (f.drop_record, f.record_version) {
        (true, None) => {}
        (true, Some(v)) => {
            w.add_delete(&path, Some(v))?;
            kinds.push(Failed::Record);
        }
        (false, Some(v)) => {
            w.add_set_data(&path, &record, Some(v))?;
            kinds.push(Failed::Record);
        }
        (false, None) => {
            w.add_create(&path, &record, persistent)?;
            kinds.push(Failed::Record);
        }
    }
    match how {
        How::Release { delayed, suspect } => {
            if let Some(at) = delayed {
                w.add_create(&p.delayed_entry(f.uuid, *at), b"", persistent)?;
                kinds.push(Failed::DelayedTaken);
            }
            if *suspect {
                w.add_create(&p.suspect_entry(f.uuid), b"", persistent)?;
                kinds.push(Failed::SuspectTaken);
            }
        }
        How::Consume { history, owed } => {
            if let Some(hour) = history {
                w.add_create(&p.history_entry(*hour, f.uuid), b"", persistent)?;
                kinds.push(Failed::HistoryTaken);
            }
            if *owed {
                w.add_create(&p.owed_entry(f.uuid), b"", persistent)?;
                kinds.push(Failed::OwedTaken);
            }
        }
        _ => {}
    }
    w.add_create(&p.tally_entry(&f.tally.prefix()), b"", &access.sequential())?;
    kinds.push(Failed::NoParent);
    Ok(())
}
