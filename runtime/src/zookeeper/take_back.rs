//! Taking one claim back (an expired lease, a dead worker's claim): the lock
//! deleted and an attempt counted, or the job trashed once its attempts are
//! used up, in one transaction that loses to any concurrent change.

use zookeeper_client as zk;

use crate::error::Result;
use crate::redis::POISON_CRASHES;
use crate::zookeeper::cache::Known;
use crate::zookeeper::finish::{Failed, Finish, How};
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::record::{Ending, JobRecord, LockBody};
use crate::zookeeper::recover::{fresh_record, Stall};
use crate::zookeeper::tally::Tally;
use crate::zookeeper::ZooKeeperBoard;

/// Tries of a transaction that lost a race on the job's record.
const RECORD_TRIES: usize = 4;

/// What taking a claim back says of the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Blame {
    /// Its lease ran out (the holder may live on): stalled.
    Stalled,
    /// Its worker died holding it alone: the crash is counted on it.
    Crashed,
    /// Its worker died holding several: it becomes a suspect, handed out
    /// alone next (`claim.rs`).
    Suspect,
}

impl ZooKeeperBoard {
    /// Deletes the lock of `k` (if it is still the very lock read,
    /// `lock_stat`, and its body still passes `still`) and counts an attempt
    /// with `reason`, or trashes the job when its attempts are used up, in
    /// one transaction. With [`Blame::Crashed`], the job alone killed its
    /// worker: the crash is counted too, and the job is trashed as a poison
    /// pill at [`POISON_CRASHES`] crashes; with [`Blame::Suspect`] it is
    /// marked a suspect when it goes back.
    ///
    /// Two claimers may recover the same lease at once. A lock made again
    /// after a recovery has version 0 like the one recovered, so the
    /// transaction's version check cannot tell them apart; the job's record
    /// can: every recovery rewrites it (at the version read). So the record
    /// is read before the lock, and the transaction writes the record at
    /// that version: a recovery that landed after our record read fails
    /// ours; one that landed before it deleted the lock, so our lock read
    /// finds it gone, or finds the new claim's lock (another creation zxid).
    pub(super) async fn take_back(
        &self,
        paths: &QueuePaths,
        k: &Known,
        lock_stat: &zk::Stat,
        still: impl Fn(&LockBody) -> bool,
        reason: &str,
        blame: Blame,
    ) -> Result<Stall> {
        let what = format!(
            "cannot recover the lease on job {} in queue {}",
            k.uuid, paths.queue
        );
        self.ensure_queue(paths).await?;
        let mut trash_name = k.znode.clone();
        let mut suspect = blame == Blame::Suspect;
        for _ in 0..RECORD_TRIES {
            let (mut record, record_version) = match self.read_record(paths, &k.uuid).await? {
                Some((r, v)) => (r, Some(v)),
                None => (fresh_record(k, self.inner.opts.default_max_attempts), None),
            };
            let Some((lock_stat, body)) = self.lock_still(paths, k, lock_stat, &still, &what).await? else {
                return Ok(Stall::Skipped);
            };
            let lock_stat = &lock_stat;
            let ready = record.ready_since();
            let held = (lock_stat, body.owner.as_deref());
            let (max, poisoned) = self.count_attempt(&mut record, k, held, reason, blame);
            let client = self.client(&what).await?;
            let (how, done) = if poisoned || record.attempts >= max {
                let Some(posting) = self.job_posting(&client, paths, k, &what).await? else {
                    return Ok(Stall::Skipped);
                };
                self.exhaust(&mut record, reason, max, poisoned);
                let trash_name = trash_name.clone();
                (How::Trash { posting, trash_name }, Stall::Trashed)
            } else {
                (How::back(suspect), Stall::Back)
            };
            let now = self.now_ms();
            record.log_outcome(now, record.attempts);
            let finish = Finish {
                paths,
                znode: &k.znode,
                uuid: &k.uuid,
                lock_version: lock_stat.version,
                job_version: k.version,
                tally: Tally::ended(ready, lock_stat.ctime, now, how.counted(true)),
                record,
                record_version,
                drop_record: false,
            };
            match self.finish(&client, &finish, &how).await {
                Ok(()) => {
                    // The lease is over: a lock seen there later is another one.
                    self.inner.cache.unlock(&paths.queue, &k.znode);
                    if done == Stall::Trashed {
                        self.inner.cache.forget(&paths.queue, &k.znode);
                    }
                    return Ok(done);
                }
                // The lock changed (extended, released, recovered) or the
                // job went meanwhile.
                Err(Failed::Lock | Failed::Job) => return Ok(Stall::Skipped),
                Err(Failed::TrashTaken) => trash_name = format!("{}-{}", k.znode, lock_stat.czxid),
                Err(Failed::NoParent) => self.remake(paths).await?,
                Err(Failed::SuspectTaken) => suspect = false,
                Err(Failed::Refused(e)) => return Err(self.session().error(&what, &e)),
                Err(Failed::Unknown(e)) => {
                    tracing::warn!(job = %k.uuid, queue = %paths.queue, error = %e, "recovery outcome unknown; checking");
                    if !self.lock_unchanged(paths, k, lock_stat, &what).await? {
                        return Ok(done);
                    }
                }
                // The record or an entry changed meanwhile: read again.
                Err(_) => {}
            }
        }
        Ok(Stall::Skipped)
    }

    /// Reads the lock of `k` again: its stat and body while it is still the
    /// lock `lock_stat` and its body passes `still`, `None` once it changed
    /// or went.
    async fn lock_still(
        &self,
        paths: &QueuePaths,
        k: &Known,
        lock_stat: &zk::Stat,
        still: &impl Fn(&LockBody) -> bool,
        what: &str,
    ) -> Result<Option<(zk::Stat, LockBody)>> {
        let lock_path = paths.lock(&k.znode);
        let lock = self
            .read(what, |client| {
                let lock_path = lock_path.clone();
                async move { client.get_data(&lock_path).await }
            })
            .await?;
        match lock.map(|(data, stat)| (stat, LockBody::parse(&data))) {
            Ok((stat, body)) if stat.czxid == lock_stat.czxid && still(&body) => Ok(Some((stat, body))),
            Ok(_) | Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(self.session().error(what, &e)),
        }
    }

    /// Counts the recovery of the lease `lock_stat` in `record` as an
    /// attempt that failed for `reason` (and, when `crashed`, a crash);
    /// returns the job's most attempts, and whether it is a poison pill.
    fn count_attempt(
        &self,
        record: &mut JobRecord,
        k: &Known,
        (lock_stat, owner): (&zk::Stat, Option<&str>),
        reason: &str,
        blame: Blame,
    ) -> (u32, bool) {
        let crashed = blame == Blame::Crashed;
        record.job = Some(k.znode.clone());
        record.attempts += 1;
        record.crashes += u32::from(crashed);
        record.token = lock_stat.czxid as u64;
        record.fail(reason);
        record.log_claim(owner, record.token, lock_stat.ctime);
        if blame == Blame::Stalled {
            record.log(
                self.now_ms(),
                "stalled",
                serde_json::json!({ "worker": owner.unwrap_or("") }),
            );
        }
        record.log_failed(self.now_ms(), reason);
        let max = match record.max_attempts {
            0 => self.inner.opts.default_max_attempts,
            n => n,
        };
        (max, crashed && record.crashes >= POISON_CRASHES)
    }

    /// The posting of `k`, to move to the trash; `None` when the job is gone.
    async fn job_posting(
        &self,
        client: &zk::Client,
        paths: &QueuePaths,
        k: &Known,
        what: &str,
    ) -> Result<Option<Vec<u8>>> {
        match client.get_data(&paths.job(&k.znode)).await {
            Ok((data, _)) => Ok(Some(data)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(self.session().error(what, &e)),
        }
    }

    /// Marks `record` trashed: its `max` attempts are used up, or it is a
    /// poison pill (Redis' reason, so both land in the `poison-pill` group).
    fn exhaust(&self, record: &mut JobRecord, reason: &str, max: u32, poisoned: bool) {
        record.ending = Ending::Trashed;
        record.finished_ms = Some(self.now_ms());
        record.fail(&if poisoned {
            format!(
                "poison pill: killed its worker {} times (last: {reason})",
                record.crashes
            )
        } else {
            format!("{reason} (attempts exhausted: {} of {max})", record.attempts)
        });
    }

    /// After an unknown outcome: true while the lock is still the one being
    /// recovered (same creation zxid and version), i.e. the recovery did
    /// not land.
    async fn lock_unchanged(
        &self,
        paths: &QueuePaths,
        k: &Known,
        lock_stat: &zk::Stat,
        what: &str,
    ) -> Result<bool> {
        let lock = paths.lock(&k.znode);
        match self.client(what).await?.get_data(&lock).await {
            Ok((_, stat)) if stat.czxid == lock_stat.czxid && stat.version == lock_stat.version => Ok(true),
            Ok(_) | Err(zk::Error::NoNode) => Ok(false),
            Err(e) => Err(self.session().error(what, &e)),
        }
    }
}
