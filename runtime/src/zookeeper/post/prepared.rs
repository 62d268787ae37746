//! A post staged for a transaction (see `post.rs`): what it writes, in
//! which order, and which op of the transaction is which.

use zookeeper_client as zk;

use crate::job::{JobId, NewJob};
use crate::zookeeper::access::Access;
use crate::zookeeper::deps::{Link, LinkOp};
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::record::{DepRef, JobRecord};
use crate::zookeeper::unique::Take;

/// A post ready for a transaction: the job, its id, the posting's bytes,
/// jobworker's record, the delayed entry when it runs later, its index
/// entries and its links to the dependencies it waits for. [`ZooKeeperBoard::prepare_post`] makes it; a post stages it in
/// a transaction of its own, and the recurring spawn (`recurring.rs`)
/// stages several in one transaction with the template's version-checked
/// write.
pub(crate) struct Prepared {
    /// The job's id.
    pub id: JobId,
    pub(super) job: NewJob,
    pub(super) details: rmpv::Value,
    pub(super) bytes: Vec<u8>,
    pub(super) record: JobRecord,
    pub(super) delayed: Option<String>,
    pub(super) entries: Entries,
}

impl Prepared {
    /// Sets the post's time to `now` (server clock): the record's post time
    /// and, for a job that runs later, its run-at time and delayed entry.
    pub(super) fn stamp(&mut self, paths: &QueuePaths, now: i64) {
        let run_at = now.saturating_add(self.job.run_at.delay().as_millis() as i64);
        self.record.posted_ms = now;
        self.record.run_at_ms = if run_at > now { run_at } else { 0 };
        self.delayed = (run_at > now).then(|| paths.delayed_entry(self.id.as_str(), run_at));
    }

    /// The index entries the post creates (their parents must exist: see
    /// [`ZooKeeperBoard::ensure_parents`]).
    pub(crate) fn index(&self) -> &[String] {
        &self.entries.index
    }

    /// The job being posted.
    pub(crate) fn job(&self) -> &NewJob {
        &self.job
    }

    /// Makes the job wait for `pending` (the dependencies not met yet, tied
    /// to by `links`): while any is, the job gets no job znode and no
    /// delayed entry (its release makes them).
    pub(crate) fn wait_for(&mut self, paths: &QueuePaths, pending: Vec<DepRef>, links: Vec<Link>) {
        let run_at = self.record.run_at_ms;
        self.delayed =
            (pending.is_empty() && run_at > 0).then(|| paths.delayed_entry(self.id.as_str(), run_at));
        self.record.depends = pending;
        self.entries.links = links;
    }

    /// Whether the job waits for dependencies.
    pub(crate) fn is_waiting(&self) -> bool {
        !self.record.depends.is_empty()
    }

    /// How many bytes the post adds to a transaction, about.
    pub(crate) fn size(&self) -> usize {
        self.bytes.len() + self.entries.index.len() * 64 + 512
    }

    /// Stages the post in `w`: the record, the delayed entry, the index
    /// entries (leftovers deleted first), the unique key, and the job
    /// znode last (its name is read from the last create's result).
    pub(crate) fn stage(
        &self,
        w: &mut zk::MultiWriter<'_>,
        paths: &QueuePaths,
        access: &Access,
    ) -> Result<(), zk::Error> {
        let persistent = &access.persistent();
        let id = self.id.as_str();
        w.add_create(&paths.record(id), &self.record.to_bytes(), persistent)?;
        if let Some(entry) = &self.delayed {
            w.add_create(entry, b"", persistent)?;
        }
        let entries = &self.entries;
        entries.leftovers.iter().try_for_each(|e| w.add_delete(e, None))?;
        entries
            .index
            .iter()
            .try_for_each(|e| w.add_create(e, b"", persistent))?;
        if let Some(take) = &entries.unique {
            take.stage(w, persistent)?;
        }
        for link in &entries.links {
            match &link.op {
                LinkOp::Check(v) => w.add_check_version(&link.record, *v)?,
                LinkOp::Flag(record, v) => w.add_set_data(&link.record, record, Some(*v))?,
                LinkOp::Create { record, job, version } => {
                    w.add_create(&link.record, record, persistent)?;
                    w.add_check_version(job, *version)?;
                }
            }
            if let Some(entry) = &link.entry {
                w.add_create(entry, b"", persistent)?;
            }
            w.add_set_data(&link.dir, b"", None)?;
        }
        if self.is_waiting() {
            return w.add_create(&paths.waiting_entry(id), &self.bytes, persistent);
        }
        w.add_create(
            &format!("{}/{}", paths.jobs, paths::JOB_PREFIX),
            &self.bytes,
            &access.sequential(),
        )
    }
}

/// The index entries a post makes (tags, tracking), those among them
/// that an earlier job of the same id left behind (deleted first), the
/// write that takes its unique key and the links to its dependencies.
pub(super) struct Entries {
    pub(super) index: Vec<String>,
    pub(super) leftovers: Vec<String>,
    pub(super) unique: Option<Take>,
    pub(super) links: Vec<Link>,
}

impl Entries {
    /// True when op `i` of the transaction created an index entry.
    pub(super) fn is_entry(&self, i: usize, delayed: bool) -> bool {
        let first = 1 + usize::from(delayed) + self.leftovers.len();
        i.checked_sub(first).is_some_and(|k| k < self.index.len())
    }

    /// True when op `i` of the transaction took the unique key.
    pub(super) fn is_unique(&self, i: usize, delayed: bool) -> bool {
        let at = 1 + usize::from(delayed) + self.leftovers.len() + self.index.len();
        self.unique.is_some() && i == at
    }

    /// The index of the first link op.
    fn first_link(&self, delayed: bool) -> usize {
        1 + usize::from(delayed)
            + self.leftovers.len()
            + self.index.len()
            + usize::from(self.unique.is_some())
    }

    /// True when op `i` of the transaction belongs to a link.
    pub(super) fn is_link(&self, i: usize, delayed: bool) -> bool {
        let ops: usize = self.links.iter().map(Link::ops).sum();
        i.checked_sub(self.first_link(delayed)).is_some_and(|k| k < ops)
    }

    /// True when op `i` is the last: the job znode or waiting entry.
    pub(super) fn is_last(&self, i: usize, delayed: bool) -> bool {
        i == self.first_link(delayed) + self.links.iter().map(Link::ops).sum::<usize>()
    }
}
