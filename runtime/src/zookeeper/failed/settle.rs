//! retry and purge of trashed jobs (see `failed.rs` for what a failure
//! group is).
//!
//! A retry is one transaction per job: the trash copy goes and the record
//! is reset (live, no attempts, no reason, no retry time, no znode name
//! yet), each at the version read, and a new persistent sequential job
//! znode is created with the posting's bytes (and a tally entry counts the
//! retry in the statistics), so the job keeps its id,
//! name and arguments and queues behind the jobs of its priority. Its
//! creation fires the jobs path's child watch, which wakes waiting workers,
//! and the next claim lists it. The new znode's name is written into the
//! record after the commit (best effort, as a post does). A purge is one
//! transaction too: the trash copy and the record go, each at the version
//! read. Either reads the job again when it changed in between, and after
//! a commit whose answer was lost checks whether it landed before trying
//! again, so a job is never put back twice.

use zookeeper_client as zk;

use super::{trashed_by_us, Failure};
use crate::error::{Error, Result};
use crate::job::JobId;
use crate::zookeeper::lease::TRIES;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::post::created_job;
use crate::zookeeper::posting;
use crate::zookeeper::record::{Ending, JobRecord};
use crate::zookeeper::session::{failed_op, is_definite, source};
use crate::zookeeper::tally::Tally;
use crate::zookeeper::ZooKeeperBoard;

/// Jobs retried or purged at once (their transactions pipelined on the
/// session).
const AT_ONCE: usize = 32;

/// What to do with a trashed job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Settle {
    /// Put it back to work.
    Retry,
    /// Delete it for good.
    Purge,
}

/// What one retry or purge transaction did.
enum Tried {
    /// Committed (a retry's new job znode name, when the reply had it).
    Done(Option<String>),
    /// The job changed between the reads and the transaction: read again.
    Again,
    /// The answer was lost: it may have landed.
    Unknown,
}

/// The record of a retried job: live and fresh, its tries to come, and
/// `retried` (from its failure group) in its history; the new znode's name
/// is written later.
fn retried(record: &JobRecord, now_ms: i64) -> JobRecord {
    let mut fresh = JobRecord {
        job: None,
        ending: Ending::Live,
        attempts: 0,
        crashes: 0,
        run_at_ms: 0,
        reason: None,
        group: None,
        finished_ms: None,
        ..record.clone()
    };
    fresh.log(now_ms, "retried", serde_json::json!({ "from": record.group }));
    fresh
}

impl ZooKeeperBoard {
    /// retry: puts trashed jobs back to work, attempts reset. One result
    /// per job (`is_not_found` when it is not in a failure group).
    pub(crate) async fn retry_trashed(&self, queue: &str, ids: &[JobId]) -> Result<Vec<Result<()>>> {
        self.settle_each(queue, ids, Settle::Retry).await
    }

    /// purge: deletes trashed jobs for good. One result per job
    /// (`is_not_found` when it is not in a failure group).
    pub(crate) async fn purge_trashed(&self, queue: &str, ids: &[JobId]) -> Result<Vec<Result<()>>> {
        self.settle_each(queue, ids, Settle::Purge).await
    }

    /// Retries or purges each of `ids`, [`AT_ONCE`] at a time; one result
    /// per job, in order.
    pub(super) async fn settle_each(
        &self,
        queue: &str,
        ids: &[JobId],
        how: Settle,
    ) -> Result<Vec<Result<()>>> {
        let paths = self.paths(queue)?;
        if how == Settle::Retry && !ids.is_empty() {
            // The jobs path the jobs go back to.
            self.ensure_queue(&paths).await?;
        }
        let mut out = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(AT_ONCE) {
            let tries = chunk.iter().map(|id| self.settle_one(&paths, id.as_str(), how));
            out.extend(futures_util::future::join_all(tries).await);
        }
        Ok(out)
    }

    /// Retries or purges job `uuid` (see the module docs).
    async fn settle_one(&self, paths: &QueuePaths, uuid: &str, how: Settle) -> Result<()> {
        let not_found = || Error::not_found(&paths.queue, uuid);
        if paths::validate_job_id(uuid).is_err() {
            return Err(not_found());
        }
        let verb = match how {
            Settle::Retry => "retry",
            Settle::Purge => "purge",
        };
        let what = format!("cannot {verb} job {uuid} in queue {}", paths.queue);
        for _ in 0..TRIES {
            let Some(f) = self.find_failure(paths, uuid, &what).await? else {
                return Err(not_found());
            };
            let znode = match self.commit_settle(paths, &f, how, &what).await? {
                Tried::Done(znode) => znode,
                Tried::Again => continue,
                Tried::Unknown if self.settle_landed(paths, &f, how, &what).await? => None,
                Tried::Unknown => continue,
            };
            self.settled(paths, &f, how, znode).await;
            return Ok(());
        }
        Err(self.keeps_changing(&what))
    }

    /// Job `uuid` as a member of a failure group: its record says trashed,
    /// and its trash copy is there. `None` when it is not in a group.
    async fn find_failure(&self, paths: &QueuePaths, uuid: &str, what: &str) -> Result<Option<Failure>> {
        let Some((record, record_version)) = self.read_record(paths, uuid).await? else {
            return Ok(None);
        };
        let Some(job) = record.job.clone().filter(|_| record.ending == Ending::Trashed) else {
            return Ok(None);
        };
        let mut names = vec![job.clone()];
        let mut copies = self.read_many(what, vec![paths.trashed(&job)]).await?;
        let ours = |copy: &Option<(Vec<u8>, zk::Stat)>| {
            copy.as_ref()
                .is_some_and(|(d, _)| posting::decode(d).is_ok_and(|p| p.uuid == uuid))
        };
        if !copies.first().is_some_and(ours) {
            // The copy got a suffixed name (its znode's name was taken).
            names = self.children(what, &paths.trash).await?;
            names.retain(|n| n != &job && trashed_by_us(n, &record));
            copies = self
                .read_many(what, names.iter().map(|n| paths.trashed(n)).collect())
                .await?;
        }
        let found = names
            .into_iter()
            .zip(copies)
            .filter(|(_, copy)| ours(copy))
            .filter_map(|(name, copy)| copy.map(|(posting, stat)| (name, posting, stat)))
            .max_by_key(|(_, _, stat)| stat.ctime);
        Ok(found.map(|(name, posting, copy)| Failure {
            name,
            posting,
            copy,
            uuid: uuid.to_owned(),
            record,
            record_version,
        }))
    }

    /// One retry or purge transaction of `f` (see the module docs).
    async fn commit_settle(&self, paths: &QueuePaths, f: &Failure, how: Settle, what: &str) -> Result<Tried> {
        let client = self.client(what).await?;
        let access = self.session().access();
        let record = paths.record(&f.uuid);
        let mut w = client.new_multi_writer();
        let staged = w
            .add_delete(&paths.trashed(&f.name), Some(f.copy.version))
            .and_then(|_| match how {
                Settle::Retry => w
                    .add_set_data(
                        &record,
                        &retried(&f.record, self.now_ms()).to_bytes(),
                        Some(f.record_version),
                    )
                    .and_then(|_| {
                        let tally = Tally::retried(self.now_ms()).prefix();
                        w.add_create(&paths.tally_entry(&tally), b"", &access.sequential())
                    })
                    .and_then(|_| {
                        let job = format!("{}/{}", paths.jobs, paths::JOB_PREFIX);
                        w.add_create(&job, &f.posting, &access.sequential())
                    }),
                Settle::Purge => w.add_delete(&record, Some(f.record_version)),
            });
        staged.map_err(|e| self.session().error(what, &e))?;
        match w.commit().await {
            Ok(results) => Ok(Tried::Done(created_job(results))),
            Err(e) => match failed_op(&e) {
                // The tally or jobs path is gone (someone deleted the
                // queue, or made it before there was a tally).
                Some((2 | 3, zk::Error::NoNode)) if how == Settle::Retry => {
                    self.remake(paths).await?;
                    Ok(Tried::Again)
                }
                Some((_, zk::Error::NoNode | zk::Error::BadVersion)) => Ok(Tried::Again),
                _ if is_definite(source(&e)) => Err(self.session().error(what, source(&e))),
                _ => {
                    tracing::warn!(job = %f.uuid, queue = %paths.queue, error = %e, "{what}: outcome unknown; checking");
                    Ok(Tried::Unknown)
                }
            },
        }
    }

    /// After a lost answer: true when the transaction of `f` landed. The
    /// copy read must be gone, and the record live again (a retry) or gone
    /// (a purge). Nothing else removes a trash copy and changes its record
    /// so, but another retry or purge of the same job, which leaves the job
    /// as ours would have.
    async fn settle_landed(&self, paths: &QueuePaths, f: &Failure, how: Settle, what: &str) -> Result<bool> {
        let reads = vec![paths.trashed(&f.name), paths.record(&f.uuid)];
        let mut reads = self.read_many(what, reads).await?.into_iter();
        let (copy, record) = (reads.next().flatten(), reads.next().flatten());
        if copy.is_some_and(|(_, stat)| stat.czxid == f.copy.czxid) {
            return Ok(false);
        }
        Ok(match how {
            Settle::Retry => record
                .and_then(|(data, _)| JobRecord::from_bytes(&data))
                .is_some_and(|r| r.ending == Ending::Live),
            Settle::Purge => record.is_none(),
        })
    }

    /// After a retry or purge of `f`: the caches forget the old znode, a
    /// stale delayed entry goes, a purged job's index entries go, and a
    /// retried job's record names its new znode (`znode`, when known). All
    /// best effort: a stale delayed entry only delays the job until its
    /// time, a leftover index entry is never listed (`tags.rs`), and a
    /// record without the name costs a later lookup a scan.
    async fn settled(&self, paths: &QueuePaths, f: &Failure, how: Settle, znode: Option<String>) {
        let q = &paths.queue;
        if let Some(old) = &f.record.job {
            self.inner.cache.forget(q, old);
        }
        self.inner.cache.unlocate(q, &f.uuid);
        if how == Settle::Retry {
            self.emit(q, &f.uuid, &retried(&f.record, self.now_ms()).fresh);
        }
        if how == Settle::Purge {
            self.drop_index_entries(paths, &f.uuid, &f.record.tags).await;
        }
        let Some(client) = self.session().current() else {
            return;
        };
        if f.record.run_at_ms > 0 {
            let _ = client
                .delete(&paths.delayed_entry(&f.uuid, f.record.run_at_ms), None)
                .await;
        }
        let Some(znode) = znode.filter(|_| how == Settle::Retry) else {
            return;
        };
        self.inner.cache.located(q, &f.uuid, &znode);
        let mut named = retried(&f.record, self.now_ms());
        named.job = Some(znode);
        let version = f.record_version.wrapping_add(1);
        if let Err(e) = client
            .set_data(&paths.record(&f.uuid), &named.to_bytes(), Some(version))
            .await
        {
            tracing::debug!(job = %f.uuid, queue = %q, error = %e, "cannot record the retried job's znode name");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retried_record_starts_afresh_and_keeps_the_job_s_settings() {
        let mut r = JobRecord {
            job: Some("job0000000001".into()),
            name: "resize".into(),
            priority: 7,
            max_attempts: 3,
            attempts: 3,
            crashes: 3,
            run_at_ms: 5,
            token: 42,
            ending: Ending::Trashed,
            tags: vec!["t".into()],
            finished_ms: Some(9),
            ..JobRecord::default()
        };
        r.fail("fatal: no");
        let fresh = retried(&r, 1);
        assert_eq!(
            (fresh.ending, fresh.attempts, fresh.crashes, fresh.run_at_ms),
            (Ending::Live, 0, 0, 0)
        );
        assert_eq!(
            (fresh.job, fresh.reason, fresh.group, fresh.finished_ms),
            (None, None, None, None)
        );
        assert_eq!(
            (
                fresh.name.as_str(),
                fresh.priority,
                fresh.max_attempts,
                fresh.token,
                fresh.tags
            ),
            ("resize", 7, 3, 42, vec!["t".to_owned()])
        );
    }
}
