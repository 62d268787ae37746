//! One listing of a queue (its job znodes, which are locked, its delayed
//! entries) and the lease deadlines read from its lock bodies.

use std::collections::{HashMap, HashSet};

use zookeeper_client as zk;

use super::LockState;
use crate::error::Result;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::record::LockBody;
use crate::zookeeper::ZooKeeperBoard;

/// One listing of a queue: job znodes, which are locked, and the delayed
/// entries.
#[derive(Debug, Default, Clone)]
pub(crate) struct Snapshot {
    /// Job znode names (in no particular order).
    pub jobs: Vec<String>,
    /// Job znodes with a `.lock` sibling.
    pub locked: HashSet<String>,
    /// Delayed entries: uuid → (due time, entry names).
    pub delayed: HashMap<String, (i64, Vec<String>)>,
    /// Suspects (jobs to hand out alone), by uuid; read by claims only.
    pub suspects: HashSet<String>,
    /// The jobs path's creation zxid (none when it is missing): another
    /// one means the path was made again, and its names start over.
    pub jobs_made: Option<i64>,
}

impl Snapshot {
    /// The snapshot of a listing: the jobs path's `children` and the
    /// delayed path's entries.
    pub(crate) fn from_listing(children: Vec<String>, delayed: Vec<String>) -> Snapshot {
        let mut snap = Snapshot {
            jobs: Vec::with_capacity(children.len()),
            ..Snapshot::default()
        };
        for child in children {
            if let Some(job) = paths::locked_job(&child) {
                snap.locked.insert(job.to_owned());
            } else if paths::is_job_name(&child) {
                snap.jobs.push(child);
            }
        }
        for entry in delayed {
            if let Some((uuid, at)) = paths::parse_delayed(&entry) {
                let slot = snap.delayed.entry(uuid.to_owned()).or_insert((at, Vec::new()));
                slot.0 = slot.0.max(at);
                slot.1.push(entry);
            }
        }
        snap
    }

    /// How many of the listed jobs are locked (a lock whose job is gone is
    /// not counted): what a concurrency limit is measured against.
    pub(crate) fn held(&self) -> usize {
        self.jobs.iter().filter(|j| self.locked.contains(*j)).count()
    }

    /// The time job `uuid` falls due, when it is not due by `now_ms`.
    pub(crate) fn scheduled_until(&self, uuid: &str, now_ms: i64) -> Option<i64> {
        self.delayed
            .get(uuid)
            .map(|(at, _)| *at)
            .filter(|at| *at > now_ms)
    }
}

/// Lock bodies read for a set of locked jobs.
pub(crate) struct LockView {
    /// Job znode → (lock body, lock stat).
    pub locks: HashMap<String, (LockBody, zk::Stat)>,
}

impl ZooKeeperBoard {
    /// Lists `paths.jobs` then the delayed entries (in this order, so a job
    /// posted with a delay in between is never taken for ready), with a
    /// child watch on the jobs path when `watch`. A queue never posted to
    /// lists empty.
    pub(crate) async fn snapshot(
        &self,
        paths: &QueuePaths,
        watch: bool,
    ) -> Result<(Snapshot, Option<zk::OneshotWatcher>)> {
        let what = format!("cannot list queue {}", paths.queue);
        let (children, made, delayed, watcher) = self
            .read(&what, |client| {
                let jobs_path = paths.jobs.clone();
                let delayed_path = paths.delayed.clone();
                async move {
                    let (children, made, watcher) = if watch {
                        match client.get_and_watch_children(&jobs_path).await {
                            Ok((c, stat, w)) => (c, Some(stat.czxid), Some(w)),
                            Err(zk::Error::NoNode) => {
                                // Wake when the queue is made.
                                let (_, w) = client.check_and_watch_stat(&jobs_path).await?;
                                (Vec::new(), None, Some(w))
                            }
                            Err(e) => return Err(e),
                        }
                    } else {
                        match client.get_children(&jobs_path).await {
                            Ok((c, stat)) => (c, Some(stat.czxid), None),
                            Err(zk::Error::NoNode) => (Vec::new(), None, None),
                            Err(e) => return Err(e),
                        }
                    };
                    let delayed = match client.list_children(&delayed_path).await {
                        Ok(d) => d,
                        Err(zk::Error::NoNode) => Vec::new(),
                        Err(e) => return Err(e),
                    };
                    Ok((children, made, delayed, watcher))
                }
            })
            .await?
            .map_err(|e| self.session().error(&what, &e))?;
        let mut snap = Snapshot::from_listing(children, delayed);
        snap.jobs_made = made;
        Ok((snap, watcher))
    }

    /// Reads the lock bodies of `snap`'s locked jobs whose deadline was
    /// seen passing, and (when `unknown`) of those never read, so a lock is
    /// read about once per lease; returns those read.
    pub(crate) async fn lock_view(
        &self,
        paths: &QueuePaths,
        snap: &Snapshot,
        now_ms: i64,
        unknown: bool,
    ) -> Result<LockView> {
        let q = &paths.queue;
        let stale: Vec<String> = snap
            .locked
            .iter()
            .filter(|n| match self.inner.cache.lock_state(q, n, now_ms) {
                LockState::Passed => true,
                LockState::Unknown => unknown,
                LockState::Ahead(_) | LockState::Untimed => false,
            })
            .cloned()
            .collect();
        let what = format!("cannot read the claims of queue {q}");
        let read = self
            .read_many(&what, stale.iter().map(|n| paths.lock(n)).collect())
            .await?;
        let mut locks = HashMap::new();
        for (name, result) in stale.into_iter().zip(read) {
            if let Some((data, stat)) = result {
                let body = LockBody::parse(&data);
                self.inner.cache.saw_lock(q, &name, body.deadline_ms);
                locks.insert(name, (body, stat));
            }
        }
        Ok(LockView { locks })
    }

    /// The earliest cached lease deadline among `snap`'s locks.
    pub(crate) fn next_deadline(&self, paths: &QueuePaths, snap: &Snapshot, now_ms: i64) -> Option<i64> {
        snap.locked
            .iter()
            .filter_map(|n| match self.inner.cache.lock_state(&paths.queue, n, now_ms) {
                LockState::Ahead(d) => Some(d),
                _ => None,
            })
            .min()
    }
}
