//! A claim transaction's answer (`claim.rs`): whether the lock is ours,
//! the job's record, and the claim handed out; a lock that is ours but
//! cannot be handed out is let go.

use std::time::Duration;

use zookeeper_client as zk;

use super::{Attempt, Claimer};
use crate::codec::args_of;
use crate::error::Result;
use crate::job::{Claimed, JobId, Lease};
use crate::zookeeper::cache::Known;
use crate::zookeeper::events;
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::record::{JobRecord, LockBody};
use crate::zookeeper::ZooKeeperBoard;

/// What a claim read along with its transaction, and when.
pub(super) struct Reads {
    /// The lock, read right after the transaction.
    pub lock: Result<(Vec<u8>, zk::Stat), zk::Error>,
    /// The job's record, read right after the lock.
    pub record: Result<(Vec<u8>, zk::Stat), zk::Error>,
    /// When the transaction was sent and answered (local ms).
    pub sent: i64,
    pub received: i64,
}

impl ZooKeeperBoard {
    /// The claim `id` of `k` for `claimer` once its transaction is sent:
    /// ours only if the lock carries our claim id (also after a lost reply)
    /// and was not made in a session this board lost since.
    pub(super) async fn confirm(
        &self,
        paths: &QueuePaths,
        k: &Known,
        claimer: &Claimer<'_>,
        id: &str,
        reads: Reads,
    ) -> Result<Attempt> {
        let what = format!("cannot claim job {} in queue {}", k.uuid, paths.queue);
        let lock = paths.lock(&k.znode);
        let (sent, received) = (reads.sent, reads.received);
        let (lock_read, record_read) = (reads.lock, reads.record);
        let carries_id = |data: &[u8]| LockBody::parse(data).claim_id.as_deref() == Some(id);
        let (lock_data, lock_stat, record_read) = match lock_read {
            Ok((data, stat)) if carries_id(&data) && !self.session().was_lost(stat.ephemeral_owner) => {
                self.session().clock.sample(stat.ctime, sent, received);
                (data, stat, Some(record_read))
            }
            _ => {
                let again = self
                    .read(&what, |client| {
                        let lock = lock.clone();
                        async move { client.get_data(&lock).await }
                    })
                    .await?;
                match again {
                    Ok((data, stat)) if carries_id(&data) => {
                        if self.session().was_lost(stat.ephemeral_owner) {
                            // Ours, but dying with the lost session. It is
                            // left to the server's expiry: deleting it could
                            // race that expiry and another claimer's new
                            // lock, which has the same version.
                            return Ok(Attempt::Taken);
                        }
                        (data, stat, None)
                    }
                    _ => return Ok(Attempt::Taken),
                }
            }
        };
        let record = self.claimed_record(paths, k, record_read, &lock_stat).await?;
        if claimer.due_only && record.as_ref().is_some_and(|r| r.run_at_ms > self.now_ms()) {
            // Retried with a delay after this claimer listed the queue.
            self.release_lock(paths, k, &lock_stat).await;
            return Ok(Attempt::Taken);
        }
        let mut attempt = self.claimed(paths, k, claimer.who, &lock_data, &lock_stat, record);
        if let Attempt::Claimed(c) = &mut attempt {
            c.suspect = claimer.suspect;
        }
        Ok(attempt)
    }

    /// The lock body of a claim by `who` with claim id `id`: with a lease
    /// deadline, or held for as long as the session lives (`expiry` none).
    pub(super) fn lock_body(&self, who: &str, expiry: Option<Duration>, id: &str) -> LockBody {
        match expiry {
            Some(expiry) => {
                let lease_ms = (expiry.as_millis() as i64).max(1);
                LockBody::lease(who, self.now_ms() + lease_ms, lease_ms, id)
            }
            None => LockBody::held(who, id),
        }
    }

    /// The record of a job whose lock is ours: the one read along with the
    /// claim, or read again. When it cannot be read, the lock is let go.
    async fn claimed_record(
        &self,
        paths: &QueuePaths,
        k: &Known,
        record_read: Option<Result<(Vec<u8>, zk::Stat), zk::Error>>,
        lock_stat: &zk::Stat,
    ) -> Result<Option<JobRecord>> {
        let record = match record_read {
            Some(Ok((data, _))) => Ok(JobRecord::from_bytes(&data)),
            // Posted by taskflow: no record yet.
            Some(Err(zk::Error::NoNode)) => Ok(None),
            _ => self.read_record(paths, &k.uuid).await.map(|r| r.map(|(r, _)| r)),
        };
        let record = match record {
            Ok(record) => record,
            Err(e) => {
                // We hold the lock but cannot hand the claim back: let go.
                self.release_lock(paths, k, lock_stat).await;
                return Err(e);
            }
        };
        Ok(record)
    }

    /// The claim of `k` by `who`, now that its lock (`lock_data`,
    /// `lock_stat`) is ours.
    fn claimed(
        &self,
        paths: &QueuePaths,
        k: &Known,
        who: &str,
        lock_data: &[u8],
        lock_stat: &zk::Stat,
        record: Option<JobRecord>,
    ) -> Attempt {
        let held = LockBody::parse(lock_data);
        self.inner
            .cache
            .saw_lock(&paths.queue, &k.znode, held.deadline_ms);
        let record = record.unwrap_or_default();
        let token = lock_stat.czxid as u64;
        self.emit(
            &paths.queue,
            &k.uuid,
            &[events::claimed(who, token, lock_stat.ctime)],
        );
        let max_attempts = match record.max_attempts {
            0 => self.inner.opts.default_max_attempts,
            n => n,
        };
        Attempt::Claimed(Box::new(Claimed {
            lease: Lease::new(paths.queue.clone(), JobId(k.uuid.clone()), who.to_owned(), token),
            name: k.name.clone(),
            args: args_of(&k.details),
            details: k.details.clone(),
            book: k.book.clone(),
            attempt: record.attempts + 1,
            max_attempts,
            priority: k.priority,
            suspect: false,
        }))
    }

    /// Deletes the lock `stat` of our own claim on `k` that cannot be handed
    /// back: at its version, and only from the session that made it. A
    /// lock of a session this board lost is gone or going with it, and
    /// after such a loss another claimer's new lock has the same version 0.
    /// (Within our session the lock goes only with a recovery of its lease
    /// as expired, which these fresh claims are far from; ZooKeeper cannot
    /// delete on a condition of the owner.) A failure is logged: the lock
    /// still ends at its lease deadline or with its session.
    async fn release_lock(&self, paths: &QueuePaths, k: &Known, stat: &zk::Stat) {
        let lock = paths.lock(&k.znode);
        let what = format!(
            "cannot release the claim on job {} in queue {}",
            k.uuid, paths.queue
        );
        let deleted = self
            .read(&what, |client| {
                let lock = lock.clone();
                async move {
                    if client.session_id().0 != stat.ephemeral_owner {
                        return Err(zk::Error::NoNode);
                    }
                    client.delete(&lock, Some(stat.version)).await
                }
            })
            .await;
        match deleted {
            Ok(Ok(()) | Err(zk::Error::NoNode | zk::Error::BadVersion)) => {
                self.inner.cache.unlock(&paths.queue, &k.znode);
            }
            Ok(Err(e)) => tracing::warn!(job = %k.uuid, queue = %paths.queue, error = %e, "{what}"),
            Err(e) => tracing::warn!(job = %k.uuid, queue = %paths.queue, error = %e, "{what}"),
        }
    }
}
