//! Dependencies on ZooKeeper, in one queue and across the queues of a root.
//!
//! - **post** (`link_dependencies`, staged by `post.rs`): a job whose
//!   dependencies are not all consumed waits. Its transaction creates its
//!   record (naming the dependencies it still waits for) and keeps its
//!   posting at `R/Q/.jw/waiting/<uuid>` instead of making a job znode, so
//!   neither claims nor taskflow see it; per dependency it creates the entry
//!   `R/Qd/.jw/dependents/<dep>/<Q>.<uuid>`, bumps the version of that
//!   directory (which a cancel checks) and checks the dependency's record
//!   at the version read (the first dependent sets the record's
//!   `dependents` flag instead, at that version). A dependency consumed
//!   already is met (while its record is kept, as on Redis: with no
//!   history kept it is not on the board any more); one not on the board,
//!   or cancelled, fails the post with nothing written.
//! - **consume** of a job whose record has the flag creates its owed entry
//!   `R/Q/.jw/owed/<uuid>` in the consume's transaction, which rewrites the
//!   record: a post that read the record before fails its check and reads
//!   again (finding the dependency met). The consumer then releases the
//!   dependents (`deps/release.rs`) before it returns, and deletes the owed
//!   entry; one that dies in between leaves the entry to the queue's
//!   maintenance leader (`Maintenance::release_outbox`).
//! - **release** of a dependent: its record loses the met dependency at
//!   the version read; with the last one, the same transaction deletes the
//!   waiting posting and makes its job znode (ready, or scheduled with a
//!   delayed entry when its run-at time is ahead).
//! - **cancel** (`cancel.rs`) refuses a job with live dependents unless
//!   asked to cancel them too.
//!
//! A job that taskflow posted gets a record when a job first depends on
//! it; one that taskflow consumes releases nothing (taskflow writes no
//! record), so its dependents wait until cancelled.

mod release;

use std::collections::BTreeSet;

use zookeeper_client as zk;

use crate::board::Dependencies;
use crate::error::{Error, ErrorKind, Result};
use crate::job::JobId;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::post::Prepared;
use crate::zookeeper::posting;
use crate::zookeeper::record::{DepRef, Ending, JobRecord};
use crate::zookeeper::ZooKeeperBoard;

/// How a post ties itself to one dependency not consumed yet: an op on the
/// dependency's record, and the dependent entry to create.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    /// The dependency's record.
    pub record: String,
    /// What the post's transaction does to the record.
    pub op: LinkOp,
    /// The dependency's dependents directory (its version is bumped).
    pub dir: String,
    /// The dependent entry to create (`None`: it exists already).
    pub entry: Option<String>,
}

/// What a post's transaction does to a dependency's record.
#[derive(Debug, Clone)]
pub(crate) enum LinkOp {
    /// Checks it at this version (its `dependents` flag is set).
    Check(i32),
    /// Writes it with the flag set, at this version.
    Flag(Vec<u8>, i32),
    /// Creates it with the flag set (a job taskflow posted has none),
    /// checking that the job znode is still there at `version`.
    Create {
        /// The record.
        record: Vec<u8>,
        /// The job znode.
        job: String,
        /// Its version when read.
        version: i32,
    },
}

impl Link {
    /// How many ops the link adds to a transaction.
    pub(crate) fn ops(&self) -> usize {
        2 + usize::from(self.entry.is_some()) + usize::from(matches!(self.op, LinkOp::Create { .. }))
    }
}

/// What a post finds of one of its dependencies.
enum Found {
    /// Consumed: met already.
    Met,
    /// Not on the board, or cancelled.
    Missing,
    /// Not consumed yet.
    Pending(Link),
}

impl ZooKeeperBoard {
    /// Reads the dependencies of the job `post` makes and ties it to those
    /// not met (see the module docs); a missing one fails the post.
    pub(crate) async fn link_dependencies(&self, paths: &QueuePaths, post: &mut Prepared) -> Result<()> {
        let me = post.id.as_str().to_owned();
        let mut seen = BTreeSet::new();
        let (mut pending, mut links) = (Vec::new(), Vec::new());
        for dep in &post.job().depends {
            let queue = dep.queue.clone().unwrap_or_else(|| paths.queue.clone());
            let id = dep.job.as_str();
            if !seen.insert((queue.clone(), id.to_owned())) {
                continue;
            }
            paths::validate_job_id(id)?;
            let dep_paths = self.paths(&queue)?;
            match self.dependency(&dep_paths, id, &paths.queue, &me).await? {
                Found::Met => {}
                Found::Missing => {
                    return Err(Error::new(
                        ErrorKind::NotFound,
                        format!(
                            "job {me} cannot depend on job {id} of queue {queue}: it is not on the \
                             board, or was cancelled (nothing was posted)"
                        ),
                    ))
                }
                Found::Pending(link) => {
                    pending.push(DepRef {
                        queue,
                        id: id.to_owned(),
                    });
                    links.push(link);
                }
            }
        }
        post.wait_for(paths, pending, links);
        Ok(())
    }

    /// What a post by job `me` of `queue` finds of dependency `id`.
    async fn dependency(&self, dep_paths: &QueuePaths, id: &str, queue: &str, me: &str) -> Result<Found> {
        let what = format!("cannot read job {id} of queue {}", dep_paths.queue);
        let record_path = dep_paths.record(id);
        let entry = dep_paths.dependent_entry(id, queue, me);
        let mut reads = self
            .read_many(&what, vec![record_path.clone(), entry.clone()])
            .await?
            .into_iter();
        let (record, found_entry) = (reads.next().flatten(), reads.next().flatten());
        let entry = found_entry.is_none().then_some(entry);
        let Some((data, stat)) = record else {
            return self.unrecorded(dep_paths, id, record_path, entry).await;
        };
        let Some(mut record) = JobRecord::from_bytes(&data) else {
            return Err(Error::codec(format!(
                "{what}: its record is not jobworker's json, so nothing can depend on it"
            )));
        };
        Ok(match record.ending {
            Ending::Completed => Found::Met,
            Ending::Cancelled => Found::Missing,
            Ending::Live | Ending::Trashed => {
                let op = if record.dependents {
                    LinkOp::Check(stat.version)
                } else {
                    record.dependents = true;
                    LinkOp::Flag(record.to_bytes(), stat.version)
                };
                Found::Pending(Link {
                    record: record_path,
                    op,
                    dir: dep_paths.dependents_of(id),
                    entry,
                })
            }
        })
    }

    /// A dependency without a record: a job taskflow posted (it gets one,
    /// flagged, in the post's transaction, which also checks that its job
    /// znode is still there), or none at all (never posted, or consumed
    /// while no history is kept: as on Redis, not on the board).
    async fn unrecorded(
        &self,
        dep_paths: &QueuePaths,
        id: &str,
        record_path: String,
        entry: Option<String>,
    ) -> Result<Found> {
        let Some(znode) = self.locate(dep_paths, id).await? else {
            return Ok(Found::Missing);
        };
        // The cache may still know a job consumed since: read it.
        let what = format!("cannot read job {id} of queue {}", dep_paths.queue);
        let job = dep_paths.job(&znode);
        let read = self.read_many(&what, vec![job.clone()]).await?.pop().flatten();
        let posting = read.and_then(|(data, stat)| Some((posting::decode(&data).ok()?, stat)));
        let Some((posting, stat)) = posting.filter(|(p, _)| p.uuid == id) else {
            self.inner.cache.forget(&dep_paths.queue, &znode);
            self.inner.cache.unlocate(&dep_paths.queue, id);
            return Ok(Found::Missing);
        };
        let record = JobRecord {
            job: Some(znode),
            name: posting.name,
            priority: posting.priority.0,
            max_attempts: self.inner.opts.default_max_attempts,
            posted_ms: stat.ctime,
            dependents: true,
            ..JobRecord::default()
        };
        let op = LinkOp::Create {
            record: record.to_bytes(),
            job,
            version: stat.version,
        };
        Ok(Found::Pending(Link {
            record: record_path,
            op,
            dir: dep_paths.dependents_of(id),
            entry,
        }))
    }

    /// The jobs of any queue that still wait for job `uuid` of
    /// `paths.queue` (an entry whose job no longer waits for it, e.g.
    /// cancelled, does not count), and the version of its dependents
    /// directory when read (`None`: there is none).
    pub(crate) async fn live_dependents(
        &self,
        paths: &QueuePaths,
        uuid: &str,
    ) -> Result<(Vec<DepRef>, Option<i32>)> {
        let what = format!(
            "cannot read the dependents of job {uuid} in queue {}",
            paths.queue
        );
        let dir = paths.dependents_of(uuid);
        let listed = self
            .read(&what, |client| {
                let dir = dir.clone();
                async move { client.get_children(&dir).await }
            })
            .await?;
        let (names, version) = match listed {
            Ok((names, stat)) => (names, Some(stat.version)),
            Err(zk::Error::NoNode) => (Vec::new(), None),
            Err(e) => return Err(self.session().error(&what, &e)),
        };
        // An entry naming no valid queue cannot be a job of ours.
        let (named, records): (Vec<DepRef>, Vec<String>) = names
            .iter()
            .filter_map(|n| paths::parse_dependent(n))
            .filter_map(|(queue, id)| {
                let record = self.paths(&queue).ok()?.record(&id);
                Some((DepRef { queue, id }, record))
            })
            .unzip();
        let met = DepRef {
            queue: paths.queue.clone(),
            id: uuid.to_owned(),
        };
        let reads = self.read_many(&what, records).await?;
        let live = named
            .into_iter()
            .zip(reads)
            .filter(|(_, read)| {
                read.as_ref()
                    .and_then(|(data, _)| JobRecord::from_bytes(data))
                    .is_some_and(|r| r.ending == Ending::Live && r.depends.contains(&met))
            })
            .map(|(d, _)| d)
            .collect();
        Ok((live, version))
    }

    /// A job's dependencies both ways: those it still waits for, and the
    /// jobs that wait for it.
    pub(crate) async fn dependencies_of(&self, queue: &str, job: &JobId) -> Result<Dependencies> {
        let paths = self.paths(queue)?;
        let uuid = job.as_str();
        paths::validate_job_id(uuid)?;
        let record = self.read_record(&paths, uuid).await?.map(|(r, _)| r);
        let depends_on = record
            .filter(|r| r.ending == Ending::Live)
            .map(|r| r.depends)
            .unwrap_or_default();
        let pair = |d: DepRef| (d.queue, JobId(d.id));
        Ok(Dependencies {
            depends_on: depends_on.into_iter().map(pair).collect(),
            dependents: self
                .live_dependents(&paths, uuid)
                .await?
                .0
                .into_iter()
                .map(pair)
                .collect(),
        })
    }
}
