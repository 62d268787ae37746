//! claim: taskflow's claim transaction (check the job znode's version,
//! create the ephemeral `.lock`) with jobworker's lease in the lock body
//! (`claim_named.rs` claims one job by name with it).
//!
//! A claim lists the queue, promotes due delayed jobs, recovers expired
//! leases, then takes jobs in order (higher priority first, then FIFO by
//! sequence), skipping locked and scheduled ones. Several jobs are tried
//! at once (pipelined transactions), except under a concurrency limit
//! (`limit.rs`); a job someone else locked first is skipped. The fencing token is the lock znode's creation zxid, which
//! ZooKeeper makes larger for every later claim of the job.

use std::cmp::Reverse;
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use crate::codec::args_of;
use crate::error::Result;
use crate::job::{Claimed, JobId, Lease};
use crate::zookeeper::cache::Known;
use crate::zookeeper::events;
use crate::zookeeper::limit::{room, Gate, Gated};
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::record::{JobRecord, LockBody};
use crate::zookeeper::session::{failed_op, is_definite, local_ms, source};
use crate::zookeeper::ZooKeeperBoard;

/// How often one board's claims read the locks it has never read, to find
/// expired leases (reap always does; locks seen expiring are read by every
/// claim).
const RECOVERY_INTERVAL: Duration = Duration::from_millis(200);

/// What one claim transaction did.
pub(crate) enum Attempt {
    /// The job is ours.
    Claimed(Box<Claimed>),
    /// Someone holds it.
    Taken,
    /// The job znode is gone (consumed, trashed) or was replaced.
    Gone,
    /// The claim gate moved: another claim under the queue's limit came
    /// first (`limit.rs`).
    Contended,
}

/// What a claim attempt came to, once noted.
pub(crate) enum Noted {
    /// The job is ours.
    Took,
    /// Someone holds it, or it is gone.
    Passed,
    /// Another claim under the queue's limit came first.
    Contended,
}

/// Rounds of one claim that lose to other claims under the queue's limit
/// before it gives up (empty-handed: the caller's `wait` sees the work).
const GATE_TRIES: usize = 4;

/// A random claim id (recognises our own lock after a lost reply).
fn claim_id() -> String {
    JobId::random().0.replace('-', "")
}

impl ZooKeeperBoard {
    /// Claims up to `count` jobs of one queue.
    pub(crate) async fn claim_queue(
        &self,
        queue: &str,
        who: &str,
        expiry: Duration,
        count: usize,
    ) -> Result<Vec<Claimed>> {
        let paths = self.paths(queue)?;
        self.prune_from_claim(&paths);
        for _ in 0..GATE_TRIES {
            if let Some(claimed) = self.claim_round(&paths, who, expiry, count).await? {
                return Ok(claimed);
            }
            // Another claim under the queue's limit came first: count again.
        }
        Ok(Vec::new())
    }

    /// One claim of up to `count` jobs; `None` when a claim under the
    /// queue's limit came first (`limit.rs`).
    async fn claim_round(
        &self,
        paths: &QueuePaths,
        who: &str,
        expiry: Duration,
        count: usize,
    ) -> Result<Option<Vec<Claimed>>> {
        let view = self.claim_view(paths).await?;
        let snap = &view.snap;
        if snap.jobs.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let now = self.now_ms();
        self.promote_due(paths, snap, now).await?;
        let known = self.known(paths, snap).await?;
        // Locks seen expiring are checked at every claim; locks never read
        // (other claimers' new ones) at most every RECOVERY_INTERVAL.
        let unknown = self.inner.cache.recovery_due(&paths.queue, RECOVERY_INTERVAL);
        let recovered = self.recover_expired(paths, snap, &known, now, unknown).await?;
        // Paused: due jobs and expired leases are seen to, nothing is handed out.
        if view.settings.paused {
            return Ok(Some(Vec::new()));
        }
        let mut candidates: Vec<Arc<Known>> = known
            .into_iter()
            .filter(|k| !snap.locked.contains(&k.znode) || recovered.freed.contains(&k.znode))
            .filter(|k| snap.scheduled_until(&k.uuid, now).is_none())
            .collect();
        candidates.sort_by_key(|k| (Reverse(k.priority), k.seq));
        let Some(limit) = view.settings.limit else {
            return self
                .claim_batches(paths, &candidates, who, expiry, count)
                .await
                .map(Some);
        };
        let count = count.min(room(limit, snap.held(), recovered.freed.len()));
        if count == 0 {
            return Ok(Some(Vec::new()));
        }
        match self
            .claim_gated(paths, &candidates, who, expiry, count, view.gate)
            .await?
        {
            Gated::Claimed(claimed) => Ok(Some(claimed)),
            Gated::Contended => Ok(None),
        }
    }

    /// Claims up to `count` of `candidates` (in order), several
    /// transactions at once.
    async fn claim_batches(
        &self,
        paths: &QueuePaths,
        candidates: &[Arc<Known>],
        who: &str,
        expiry: Duration,
        count: usize,
    ) -> Result<Vec<Claimed>> {
        let mut claimed = Vec::new();
        let mut next = 0;
        while claimed.len() < count && next < candidates.len() {
            let end = (next + count - claimed.len()).min(candidates.len());
            let batch = &candidates[next..end];
            next = end;
            let tries = futures_util::future::join_all(
                batch
                    .iter()
                    .map(|k| self.try_claim(paths, k, who, Some(expiry), None)),
            )
            .await;
            // Every result first: a failure must not drop the claims the
            // same batch made.
            let mut failed = None;
            for (k, attempt) in batch.iter().zip(tries) {
                if let Err(e) = self.noted(paths, k, attempt, &mut claimed) {
                    failed = failed.or(Some(e));
                }
            }
            if let Some(e) = failed {
                if claimed.is_empty() {
                    return Err(e);
                }
                // Keep what we hold; the next claim tries again.
                tracing::warn!(queue = %paths.queue, error = %e, "claim stopped early");
                break;
            }
        }
        Ok(claimed)
    }

    /// Notes what a claim attempt on `k` came to (a claimed job goes to
    /// `claimed`).
    pub(crate) fn noted(
        &self,
        paths: &QueuePaths,
        k: &Known,
        attempt: Result<Attempt>,
        claimed: &mut Vec<Claimed>,
    ) -> Result<Noted> {
        let queue = &paths.queue;
        match attempt {
            Ok(Attempt::Claimed(c)) => {
                self.inner.cache.unstuck(queue, &k.znode);
                claimed.push(*c);
                Ok(Noted::Took)
            }
            Ok(Attempt::Taken) => Ok(Noted::Passed),
            Ok(Attempt::Gone) => {
                self.inner.cache.forget(queue, &k.znode);
                Ok(Noted::Passed)
            }
            Ok(Attempt::Contended) => Ok(Noted::Contended),
            Err(e) => {
                // `wait` does not count it as work for a while.
                self.inner.cache.stuck(queue, &k.znode);
                Err(e)
            }
        }
    }

    /// One claim transaction on `k`, with the lock and the job's record
    /// read in the same round trip; `None` claims without a deadline. With
    /// a `gate`, the transaction also sets it at its version (`limit.rs`).
    pub(crate) async fn try_claim(
        &self,
        paths: &QueuePaths,
        k: &Known,
        who: &str,
        expiry: Option<Duration>,
        gate: Option<&Gate<'_>>,
    ) -> Result<Attempt> {
        let what = format!("cannot claim job {} in queue {}", k.uuid, paths.queue);
        let client = self.client(&what).await?;
        let id = claim_id();
        let body = self.lock_body(who, expiry, &id);
        let lock = paths.lock(&k.znode);
        let sent = local_ms();
        let mut w = client.new_multi_writer();
        w.add_check_version(&paths.job(&k.znode), k.version)
            .and_then(|_| w.add_create(&lock, &body.to_bytes(), &self.session().access().ephemeral()))
            .and_then(|_| match gate {
                Some(g) => w.add_set_data(g.path, &[], Some(g.version)),
                None => Ok(()),
            })
            .map_err(|e| self.session().error(&what, &e))?;
        let commit = w.commit();
        let lock_read = client.get_data(&lock);
        let record_read = client.get_data(&paths.record(&k.uuid));
        let (committed, lock_read, record_read) = futures_util::join!(commit, lock_read, record_read);
        let received = local_ms();
        match committed {
            Ok(_) => {}
            Err(e) => match failed_op(&e) {
                Some((1, zk::Error::NodeExists)) => return Ok(Attempt::Taken),
                Some((0, zk::Error::NoNode | zk::Error::BadVersion)) => return Ok(Attempt::Gone),
                Some((2, zk::Error::NoNode | zk::Error::BadVersion)) => return Ok(Attempt::Contended),
                _ if is_definite(source(&e)) => return Err(self.session().error(&what, source(&e))),
                _ => {
                    tracing::warn!(job = %k.uuid, queue = %paths.queue, error = %e, "claim outcome unknown; checking");
                }
            },
        }
        // Ours only if the lock carries our claim id (also after a lost
        // reply) and was not made in a session this board lost since.
        let carries_id = |data: &[u8]| LockBody::parse(data).claim_id.as_deref() == Some(id.as_str());
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
                            // Ours, but dying with the lost session: free the
                            // job now rather than at the server's expiry.
                            self.release_lock(paths, k, &stat).await;
                            return Ok(Attempt::Taken);
                        }
                        (data, stat, None)
                    }
                    _ => return Ok(Attempt::Taken),
                }
            }
        };
        let record = self.claimed_record(paths, k, record_read, &lock_stat).await?;
        Ok(self.claimed(paths, k, who, &lock_data, &lock_stat, record))
    }

    /// The lock body of a claim by `who` with claim id `id`: with a lease
    /// deadline, or held for as long as the session lives (`expiry` none).
    fn lock_body(&self, who: &str, expiry: Option<Duration>, id: &str) -> LockBody {
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
    /// back (at its version, so a lock made since is left alone). A failure
    /// is logged: the lock still ends at its lease deadline or with its
    /// session.
    async fn release_lock(&self, paths: &QueuePaths, k: &Known, stat: &zk::Stat) {
        let lock = paths.lock(&k.znode);
        let what = format!(
            "cannot release the claim on job {} in queue {}",
            k.uuid, paths.queue
        );
        let deleted = self
            .read(&what, |client| {
                let lock = lock.clone();
                async move { client.delete(&lock, Some(stat.version)).await }
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
