//! claim: taskflow's claim transaction (check the job znode's version,
//! create the ephemeral `.lock`) with jobworker's lease in the lock body
//! (`claim_named.rs` claims one job by name with it).
//!
//! A claim lists the queue, promotes due delayed jobs, recovers expired
//! leases, then takes jobs in order (higher priority first, then FIFO by
//! sequence), skipping locked and scheduled ones. A suspect (its worker
//! died holding several jobs, `R/Q/.jw/suspects/<uuid>`) is taken only
//! when it comes first and the claimer holds nothing, and then alone; the
//! claim's transaction deletes its entry. Several jobs are tried
//! at once (pipelined transactions), except under a concurrency limit
//! (`limit.rs`); a job someone else locked first is skipped. The fencing token is the lock znode's creation zxid, which
//! ZooKeeper makes larger for every later claim of the job.

mod confirm;
mod reuse;

pub(crate) use reuse::Listings;

use std::cmp::Reverse;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use crate::error::Result;
use crate::job::{Claimed, JobId};
use crate::zookeeper::cache::{Known, Snapshot};
use crate::zookeeper::limit::{room, Gate, Gated};
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::session::{failed_op, is_definite, local_ms, source};
use crate::zookeeper::ZooKeeperBoard;
use confirm::Reads;

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

/// Who claims, for how long, and whether the job claimed is a suspect.
pub(crate) struct Claimer<'a> {
    /// The owner string of the locks.
    pub who: &'a str,
    /// The lease; `None` holds the lock as long as the session (taskflow's).
    pub expiry: Option<Duration>,
    /// The jobs claimed are suspects: each claim deletes the job's suspect
    /// entry, and the claim says so ([`Claimed::suspect`]).
    pub suspect: bool,
    /// The jobs come from a listing (not by name): one whose record says
    /// it is not due yet (another claimer retried it with a delay since
    /// the listing) is let go.
    pub due_only: bool,
}

/// A random claim id (recognises our own lock after a lost reply).
fn claim_id() -> String {
    JobId::random().0.replace('-', "")
}

impl ZooKeeperBoard {
    /// Claims up to `count` jobs of one queue for a claimer holding
    /// `holding` jobs now (a suspect goes only to one holding none).
    pub(crate) async fn claim_queue(
        &self,
        queue: &str,
        who: &str,
        expiry: Duration,
        (count, holding): (usize, usize),
    ) -> Result<Vec<Claimed>> {
        let paths = self.paths(queue)?;
        self.prune_from_claim(&paths);
        for _ in 0..GATE_TRIES {
            if let Some(claimed) = self.claim_round(&paths, who, expiry, (count, holding)).await? {
                return Ok(claimed);
            }
            // Another claim under the queue's limit came first: count again.
        }
        Ok(Vec::new())
    }

    /// One claim of up to `count` jobs: from what a recent long listing
    /// left, then from a listing; `None` when a claim under the queue's
    /// limit came first (`limit.rs`).
    async fn claim_round(
        &self,
        paths: &QueuePaths,
        who: &str,
        expiry: Duration,
        (count, holding): (usize, usize),
    ) -> Result<Option<Vec<Claimed>>> {
        let mut early = self.claim_listed(paths, who, expiry, count).await?;
        if early.len() >= count {
            return Ok(Some(early));
        }
        let more = (count - early.len(), holding + early.len());
        match self.claim_listing(paths, who, expiry, more).await {
            Ok(Some(claimed)) => {
                early.extend(claimed);
                Ok(Some(early))
            }
            Ok(None) if early.is_empty() => Ok(None),
            Err(e) if early.is_empty() => Err(e),
            Ok(None) => Ok(Some(early)),
            Err(e) => {
                // Keep what we hold; the next claim tries again.
                tracing::warn!(queue = %paths.queue, error = %e, "claim stopped early");
                Ok(Some(early))
            }
        }
    }

    /// One claim of up to `count` jobs from a listing of the queue; `None`
    /// when a claim under the queue's limit came first (`limit.rs`).
    async fn claim_listing(
        &self,
        paths: &QueuePaths,
        who: &str,
        expiry: Duration,
        (count, holding): (usize, usize),
    ) -> Result<Option<Vec<Claimed>>> {
        let began = std::time::Instant::now();
        let view = self.claim_view(paths).await?;
        let snap = &view.snap;
        if snap.jobs.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let now = self.now_ms();
        self.promote_due(paths, snap, now).await?;
        let known = self.known(paths, snap).await?;
        self.drop_stale_suspects(paths, snap, &known);
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
        // (Sequences are unique: an unstable sort gives the one order.)
        candidates.sort_unstable_by_key(|k| (Reverse(k.priority), k.seq));
        let suspect = candidates
            .first()
            .is_some_and(|k| holding == 0 && snap.suspects.contains(&k.uuid));
        let count = if suspect {
            candidates.truncate(1);
            1
        } else {
            candidates.retain(|k| !snap.suspects.contains(&k.uuid));
            count
        };
        let claimer = Claimer {
            who,
            expiry: Some(expiry),
            suspect,
            due_only: true,
        };
        let Some(limit) = view.settings.limit else {
            let ready = std::time::Instant::now();
            let (claimed, tried) = self.claim_batches(paths, &candidates, &claimer, count).await?;
            if !suspect {
                let listing = (snap.jobs.len(), began, ready);
                (self.inner.listings).keep(&paths.queue, listing, candidates, tried);
            }
            return Ok(Some(claimed));
        };
        let count = count.min(room(limit, snap.held(), recovered.freed.len()));
        if count == 0 {
            return Ok(Some(Vec::new()));
        }
        match self
            .claim_gated(paths, &candidates, &claimer, count, view.gate)
            .await?
        {
            Gated::Claimed(claimed) => Ok(Some(claimed)),
            Gated::Contended => Ok(None),
        }
    }

    /// Claims up to `count` of the candidates a recent long listing of the
    /// queue left (`reuse.rs`), if any.
    async fn claim_listed(
        &self,
        paths: &QueuePaths,
        who: &str,
        expiry: Duration,
        count: usize,
    ) -> Result<Vec<Claimed>> {
        let Some(left) = self.inner.listings.take(&paths.queue) else {
            return Ok(Vec::new());
        };
        let claimer = Claimer {
            who,
            expiry: Some(expiry),
            suspect: false,
            due_only: true,
        };
        let (claimed, tried) = self.claim_batches(paths, left.untried(), &claimer, count).await?;
        self.inner.listings.put_back(&paths.queue, left, tried);
        Ok(claimed)
    }

    /// Claims up to `count` of `candidates` (in order), several
    /// transactions at once; with how many were tried.
    async fn claim_batches(
        &self,
        paths: &QueuePaths,
        candidates: &[Arc<Known>],
        claimer: &Claimer<'_>,
        count: usize,
    ) -> Result<(Vec<Claimed>, usize)> {
        let mut claimed = Vec::new();
        let mut next = 0;
        while claimed.len() < count && next < candidates.len() {
            let end = (next + count - claimed.len()).min(candidates.len());
            let batch = &candidates[next..end];
            next = end;
            let tries =
                futures_util::future::join_all(batch.iter().map(|k| self.try_claim(paths, k, claimer, None)))
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
        Ok((claimed, next))
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

    /// One claim transaction on `k` for `claimer`, with the lock and the
    /// job's record read in the same round trip. With a `gate`, the
    /// transaction also sets it at its version (`limit.rs`).
    pub(crate) async fn try_claim(
        &self,
        paths: &QueuePaths,
        k: &Known,
        claimer: &Claimer<'_>,
        gate: Option<&Gate<'_>>,
    ) -> Result<Attempt> {
        let what = format!("cannot claim job {} in queue {}", k.uuid, paths.queue);
        let client = self.client(&what).await?;
        let id = claim_id();
        let who = claimer.who;
        let body = self.lock_body(who, claimer.expiry, &id);
        let lock = paths.lock(&k.znode);
        let sent = local_ms();
        let mut w = client.new_multi_writer();
        w.add_check_version(&paths.job(&k.znode), k.version)
            .and_then(|_| w.add_create(&lock, &body.to_bytes(), &self.session().access().ephemeral()))
            .and_then(|_| match gate {
                Some(g) => w.add_set_data(g.path, &[], Some(g.version)),
                None => Ok(()),
            })
            .and_then(|_| match claimer.suspect {
                true => w.add_delete(&paths.suspect_entry(&k.uuid), None),
                false => Ok(()),
            })
            .map_err(|e| self.session().error(&what, &e))?;
        let suspect_op = 2 + usize::from(gate.is_some());
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
                // Claimed as a suspect by another claimer since.
                Some((i, zk::Error::NoNode)) if claimer.suspect && i == suspect_op => {
                    return Ok(Attempt::Taken)
                }
                Some((2, zk::Error::NoNode | zk::Error::BadVersion)) => return Ok(Attempt::Contended),
                _ if is_definite(source(&e)) => return Err(self.session().error(&what, source(&e))),
                _ => {
                    tracing::warn!(job = %k.uuid, queue = %paths.queue, error = %e, "claim outcome unknown; checking");
                }
            },
        }
        let reads = Reads {
            lock: lock_read,
            record: record_read,
            sent,
            received,
        };
        self.confirm(paths, k, claimer, &id, reads).await
    }

    /// Deletes, in the background, the suspect entries of jobs no longer
    /// on the jobs path (consumed after a claim by name, cancelled,
    /// trashed): best effort; claims pass over them anyway.
    fn drop_stale_suspects(&self, paths: &QueuePaths, snap: &Snapshot, known: &[Arc<Known>]) {
        if snap.suspects.is_empty() {
            return;
        }
        let listed: HashSet<&str> = known.iter().map(|k| k.uuid.as_str()).collect();
        let stale: Vec<String> = (snap.suspects.iter())
            .filter(|uuid| !listed.contains(uuid.as_str()))
            .map(|uuid| paths.suspect_entry(uuid))
            .collect();
        let Some(client) = self.session().current().filter(|_| !stale.is_empty()) else {
            return;
        };
        self.session().runtime().spawn(async move {
            for entry in stale {
                let _ = client.delete(&entry, None).await;
            }
        });
    }
}
