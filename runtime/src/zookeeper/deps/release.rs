//! Releasing the jobs that waited for a consumed job (see `deps.rs`): each
//! dependent's record loses the met dependency at the version read, and
//! the last one makes its job znode in the same transaction. Idempotent: a
//! dependent that no longer waits for the job (released, cancelled) is
//! left alone, so the consumer and the maintenance leader may both settle
//! one owed entry.

use serde_json::json;
use zookeeper_client as zk;

use crate::error::Result;
use crate::zookeeper::lease::TRIES;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::post::created_job;
use crate::zookeeper::record::{DepRef, Ending, JobRecord};
use crate::zookeeper::session::{failed_op, is_definite, lost_a_race, source};
use crate::zookeeper::ZooKeeperBoard;

impl ZooKeeperBoard {
    /// Releases the dependents of consumed job `uuid` of `paths.queue`
    /// (best effort: what fails stays owed, for the maintenance leader).
    pub(crate) async fn settle_owed(&self, paths: &QueuePaths, uuid: &str) {
        if let Err(e) = self.release_dependents(paths, uuid).await {
            tracing::warn!(job = uuid, queue = %paths.queue, error = %e, "cannot release the jobs waiting for it yet; the queue's maintenance will");
        }
    }

    /// The outbox service on ZooKeeper: settles every owed entry of
    /// `queue`; returns how many it settled. One that fails is logged and
    /// left for the next pass; it holds up none of the others.
    pub(crate) async fn release_owed(&self, queue: &str) -> Result<usize> {
        let paths = self.paths(queue)?;
        let what = format!("cannot read the releases queue {queue} owes");
        let mut settled = 0;
        for uuid in self.children(&what, &paths.owed).await? {
            match self.release_dependents(&paths, &uuid).await {
                Ok(()) => settled += 1,
                Err(e) => {
                    tracing::warn!(job = uuid, queue, error = %e, "cannot release the jobs waiting for it yet")
                }
            }
        }
        Ok(settled)
    }

    /// Releases every job that waits for consumed job `uuid`, then deletes
    /// their entries, the job's dependents directory and its owed entry.
    async fn release_dependents(&self, paths: &QueuePaths, uuid: &str) -> Result<()> {
        let what = format!(
            "cannot release the jobs waiting for job {uuid} of queue {}",
            paths.queue
        );
        let dir = paths.dependents_of(uuid);
        let met = DepRef {
            queue: paths.queue.clone(),
            id: uuid.to_owned(),
        };
        for name in self.children(&what, &dir).await? {
            if let Some((queue, id)) = paths::parse_dependent(&name) {
                match self.paths(&queue) {
                    Ok(dependent) => self.resolve(&dependent, &id, &met).await?,
                    Err(e) => {
                        tracing::warn!(entry = name, error = %e, "dropping a dependent entry that names no queue")
                    }
                }
            }
            let client = self.client(&what).await?;
            let _ = client.delete(&format!("{dir}/{name}"), None).await;
        }
        let client = self.client(&what).await?;
        let _ = client.delete(&dir, None).await;
        let _ = client.delete(&paths.owed_entry(uuid), None).await;
        Ok(())
    }

    /// Marks dependency `met` of job `id` of `paths.queue` as met; with
    /// the last one, the job's posting goes from the waiting path to a job
    /// znode.
    async fn resolve(&self, paths: &QueuePaths, id: &str, met: &DepRef) -> Result<()> {
        let what = format!("cannot release job {id} of queue {}", paths.queue);
        for _ in 0..TRIES {
            let reads = vec![paths.record(id), paths.waiting_entry(id)];
            let mut reads = self.read_many(&what, reads).await?.into_iter();
            let (record, waiting) = (reads.next().flatten(), reads.next().flatten());
            let Some((data, stat)) = record else {
                return Ok(());
            };
            let Some(mut record) = JobRecord::from_bytes(&data) else {
                return Ok(());
            };
            if record.ending != Ending::Live || !record.depends.contains(met) {
                return Ok(());
            }
            record.depends.retain(|d| d != met);
            let now = self.now_ms();
            let last = record.depends.is_empty();
            if last && waiting.is_none() {
                // Its posting was deleted behind jobworker's back: the job
                // cannot run; say so on the job rather than drop it.
                record.ending = Ending::Trashed;
                record.finished_ms = Some(now);
                record.fail("lost: the posting of this waiting job is gone (deleted outside jobworker)");
                tracing::error!(job = id, queue = %paths.queue, "the posting of a waiting job is gone; marked trashed");
            }
            let release = last.then_some(waiting).flatten();
            if release.is_some() {
                record.log(now, "released", json!({}));
            }
            let client = self.client(&what).await?;
            let access = self.session().access();
            let persistent = &access.persistent();
            let mut w = client.new_multi_writer();
            let staged = w
                .add_set_data(&paths.record(id), &record.to_bytes(), Some(stat.version))
                .and_then(|_| match &release {
                    None => Ok(()),
                    Some((posting, waiting_stat)) => {
                        w.add_delete(&paths.waiting_entry(id), Some(waiting_stat.version))?;
                        if record.run_at_ms > now {
                            w.add_create(&paths.delayed_entry(id, record.run_at_ms), b"", persistent)?;
                        }
                        let job = format!("{}/{}", paths.jobs, paths::JOB_PREFIX);
                        w.add_create(&job, posting, &access.sequential())
                    }
                });
            staged.map_err(|e| self.session().error(&what, &e))?;
            match w.commit().await {
                Ok(results) => {
                    if let Some(znode) = created_job(results).filter(|_| release.is_some()) {
                        self.emit(&paths.queue, id, &record.fresh);
                        self.name_znode(paths, id, &record, Some(stat.version), &znode)
                            .await;
                    }
                    return Ok(());
                }
                // A delayed entry of this job and time left behind.
                Err(e) if failed_op(&e).is_some_and(|(_, err)| *err == zk::Error::NodeExists) => {
                    let _ = client
                        .delete(&paths.delayed_entry(id, record.run_at_ms), None)
                        .await;
                }
                // The queue's directories were removed: make them again.
                Err(e) if failed_op(&e).is_some_and(|(i, err)| i >= 2 && *err == zk::Error::NoNode) => {
                    self.remake(paths).await?;
                }
                Err(e) if lost_a_race(&e) => {}
                Err(e) if is_definite(source(&e)) => return Err(self.session().error(&what, source(&e))),
                // The answer was lost: the next read tells.
                Err(_) => {}
            }
        }
        Err(self.keeps_changing(&what))
    }
}
