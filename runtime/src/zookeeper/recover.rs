//! reap and what claims do first: promote due delayed jobs, recover
//! expired leases (an attempt counted, the job trashed once its attempts
//! are used up), index jobs posted by taskflow, and prune the completed
//! history.
//!
//! Only locks whose body carries a jobworker lease deadline are ever
//! recovered; taskflow's own claims (no deadline) last as long as their
//! session, as in taskflow.

use std::collections::HashSet;
use std::sync::Arc;

use zookeeper_client as zk;

use crate::board::ReapReport;
use crate::error::Result;
use crate::zookeeper::cache::{Known, Snapshot, READ_BATCH};
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::record::{Ending, JobRecord, LockBody};
use crate::zookeeper::take_back::Blame;
use crate::zookeeper::ZooKeeperBoard;

/// Leases recovered by one pass.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    /// Leases recovered (attempt counted).
    pub stalled: usize,
    /// Job znodes unlocked and back to ready.
    pub freed: HashSet<String>,
}

/// What recovering one expired lease did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stall {
    /// Back to ready.
    Back,
    /// Attempts used up: trashed.
    Trashed,
    /// Someone else extended, released or recovered it first.
    Skipped,
}

/// A record for a job that has none yet (posted by taskflow).
pub(crate) fn fresh_record(k: &Known, default_max_attempts: u32) -> JobRecord {
    JobRecord {
        job: Some(k.znode.clone()),
        name: k.name.clone(),
        priority: k.priority.0,
        max_attempts: default_max_attempts,
        posted_ms: k.ctime_ms,
        ..JobRecord::default()
    }
}

impl ZooKeeperBoard {
    /// Deletes delayed entries that fell due; returns how many jobs became
    /// ready.
    pub(crate) async fn promote_due(
        &self,
        paths: &QueuePaths,
        snap: &Snapshot,
        now_ms: i64,
    ) -> Result<usize> {
        let due: Vec<&String> = snap
            .delayed
            .values()
            .filter(|(at, _)| *at <= now_ms)
            .flat_map(|(_, entries)| entries)
            .collect();
        if due.is_empty() {
            return Ok(0);
        }
        let what = format!("cannot promote the delayed jobs of queue {}", paths.queue);
        let client = self.client(&what).await?;
        let deletes = due
            .iter()
            .map(|entry| client.delete(&format!("{}/{entry}", paths.delayed), None));
        let results = futures_util::future::join_all(deletes).await;
        Ok(results.iter().filter(|r| r.is_ok()).count())
    }

    /// Recovers the expired jobworker leases among `snap`'s locks: those
    /// seen expiring, and (when `unknown`) those never read.
    pub(crate) async fn recover_expired(
        &self,
        paths: &QueuePaths,
        snap: &Snapshot,
        known: &[Arc<Known>],
        now_ms: i64,
        unknown: bool,
    ) -> Result<Recovered> {
        let mut out = Recovered::default();
        if snap.locked.is_empty() {
            return Ok(out);
        }
        let view = self.lock_view(paths, snap, now_ms, unknown).await?;
        for (znode, (body, stat)) in &view.locks {
            if body.deadline_ms.is_none_or(|d| d > now_ms) {
                continue;
            }
            let Some(k) = known.iter().find(|k| &k.znode == znode) else {
                // A job jobworker cannot read: its lease is left alone.
                self.inner.cache.stuck(&paths.queue, znode);
                continue;
            };
            match self.stall(paths, k, body, stat).await {
                Ok(Stall::Back) => {
                    out.stalled += 1;
                    out.freed.insert(znode.clone());
                }
                Ok(Stall::Trashed) => out.stalled += 1,
                Ok(Stall::Skipped) => self.inner.cache.stuck(&paths.queue, znode),
                Err(e) => {
                    self.inner.cache.stuck(&paths.queue, znode);
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Recovers one expired lease: deletes the lock (if it is still the one
    /// read, `lock_stat`) and counts an attempt, or trashes the job when its
    /// attempts are used up, in one transaction.
    pub(crate) async fn stall(
        &self,
        paths: &QueuePaths,
        k: &Known,
        body: &LockBody,
        lock_stat: &zk::Stat,
    ) -> Result<Stall> {
        let owner = body.owner.as_deref().unwrap_or("an unnamed owner");
        let reason = format!("stalled: lease of {owner} expired");
        tracing::warn!(job = %k.uuid, queue = %paths.queue, owner, "recovering an expired lease");
        let now = self.now_ms();
        let expired = |b: &LockBody| b.deadline_ms.is_some_and(|d| d <= now);
        self.take_back(paths, k, lock_stat, expired, &reason, Blame::Stalled)
            .await
    }

    /// Gives back every claim `owner` holds in `queue` (a dead worker's),
    /// at once instead of at their lease deadline or session end, counting
    /// an attempt on each with reason `crashed: <reason>`; a job whose
    /// attempts are used up is trashed. Claims made by taskflow are given
    /// back too (ownership is the owner string, as in taskflow). When the
    /// worker held one job, the crash is blamed on it (a poison pill is
    /// trashed at its third); one that held several blames none, and its
    /// jobs become suspects, handed out alone to an idle claimer (as on
    /// Redis), so a poison pill among them is blamed when it next kills its
    /// worker. Returns (back to ready, trashed).
    pub async fn recover_owner(&self, queue: &str, owner: &str, reason: &str) -> Result<(usize, usize)> {
        let paths = self.paths(queue)?;
        let (snap, _) = self.snapshot(&paths, false).await?;
        let known = self.known(&paths, &snap).await?;
        let what = format!("cannot recover the claims of {owner} in queue {queue}");
        let locked: Vec<&Arc<Known>> = known.iter().filter(|k| snap.locked.contains(&k.znode)).collect();
        let locks = self
            .read_many(&what, locked.iter().map(|k| paths.lock(&k.znode)).collect())
            .await?;
        let owned = |b: &LockBody| b.owner.as_deref() == Some(owner);
        let mine: Vec<(&Arc<Known>, zk::Stat)> = locked
            .into_iter()
            .zip(locks)
            .filter_map(|(k, lock)| {
                lock.filter(|(data, _)| owned(&LockBody::parse(data)))
                    .map(|(_, stat)| (k, stat))
            })
            .collect();
        // Only a worker that held one job can blame it for its death; the
        // jobs of one that held several become suspects.
        let blame = match mine.len() {
            1 => Blame::Crashed,
            _ => Blame::Suspect,
        };
        let reason = format!("crashed: {reason}");
        let (mut back, mut trashed) = (0, 0);
        for (k, stat) in mine {
            match self.take_back(&paths, k, &stat, owned, &reason, blame).await? {
                Stall::Back => back += 1,
                Stall::Trashed => trashed += 1,
                Stall::Skipped => {}
            }
        }
        Ok((back, trashed))
    }

    /// Promotes due jobs, recovers expired leases, indexes jobs posted by
    /// taskflow and prunes the completed history (when this board consumed
    /// jobs since it last did, or at least once a minute).
    pub(crate) async fn reap_queue(&self, queue: &str) -> Result<ReapReport> {
        let paths = self.paths(queue)?;
        let (snap, _) = self.snapshot(&paths, false).await?;
        let now = self.now_ms();
        let promoted = self.promote_due(&paths, &snap, now).await?;
        let known = self.known(&paths, &snap).await?;
        let recovered = self.recover_expired(&paths, &snap, &known, now, true).await?;
        let indexed = self.index_foreign(&paths, &known).await?;
        if self.prune_due(queue, false) {
            self.prune(&paths).await;
        }
        Ok(ReapReport {
            promoted,
            stalled: recovered.stalled,
            indexed,
        })
    }

    /// Gives jobs that have no record (posted by taskflow) one, and records
    /// the znode name where a post's own update was lost; returns how many
    /// records it made.
    async fn index_foreign(&self, paths: &QueuePaths, known: &[Arc<Known>]) -> Result<usize> {
        if !known.is_empty() {
            self.ensure_queue(paths).await?;
        }
        let unchecked: Vec<&Arc<Known>> = known
            .iter()
            .filter(|k| !self.inner.cache.indexed(&paths.queue, &k.znode))
            .collect();
        let what = format!("cannot index the jobs of queue {}", paths.queue);
        let mut made = 0;
        for chunk in unchecked.chunks(READ_BATCH) {
            let records = self
                .read_many(&what, chunk.iter().map(|k| paths.record(&k.uuid)).collect())
                .await?;
            let client = self.client(&what).await?;
            for (k, found) in chunk.iter().zip(records) {
                let path = paths.record(&k.uuid);
                let written = match found.map(|(data, stat)| (JobRecord::from_bytes(&data), stat.version)) {
                    None => {
                        let record = fresh_record(k, self.inner.opts.default_max_attempts);
                        client
                            .create(&path, &record.to_bytes(), &self.session().access().persistent())
                            .await
                            .map(|_| 1)
                    }
                    Some((Some(mut record), version))
                        if record.job.is_none() && record.ending == Ending::Live =>
                    {
                        record.job = Some(k.znode.clone());
                        client
                            .set_data(&path, &record.to_bytes(), Some(version))
                            .await
                            .map(|_| 0)
                    }
                    _ => Ok(0),
                };
                match written {
                    Ok(n) => {
                        made += n;
                        self.inner.cache.mark_indexed(&paths.queue, &k.znode);
                    }
                    Err(zk::Error::NodeExists | zk::Error::BadVersion) => {}
                    Err(zk::Error::NoNode) => self.unmade(&paths.queue),
                    Err(e) => return Err(self.session().error(&what, &e)),
                }
            }
        }
        Ok(made)
    }
}
