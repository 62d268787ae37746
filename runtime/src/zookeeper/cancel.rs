//! cancel on ZooKeeper, and how a worker hears of it.
//!
//! A cancel is one transaction for all the jobs it names (at most
//! [`MAX_CANCEL`]), so that a job finishing meanwhile fails all of it.
//! Each job znode goes (at the version read); its lock goes with it when
//! claimed (at the version read) or is proven absent when not (created and
//! deleted in the same transaction, so a claim that lands first makes it
//! fail and it is tried again); the record says cancelled, with a history
//! entry (`<uuid>@cancelled`, pruned with the completed jobs' entries);
//! and, when a worker held the job, a cancel note
//! `R/.jw/cancels/<owner>/<uuid>` is created for it.
//!
//! A job waiting for dependencies loses its waiting entry instead (at the
//! version read), and its dependencies' entries naming it afterwards. A
//! job that others wait for is refused unless they are cancelled with it
//! (`cancel/dependents.rs`); the transaction checks the version of its
//! dependents directory, which every post that adds a dependent bumps, so
//! a dependent posted meanwhile fails the cancel and is seen when it reads
//! again.
//!
//! Each worker watches its notes directory (`cancel/notes.rs`: a child
//! watch, re-armed after every listing and after a reconnect), hands each
//! note's job id to its heartbeat, which stops the handler, and deletes the
//! note. A worker that misses its note learns at its next extend, which is
//! refused as cancelled (the record says so). Notes of a worker that
//! stopped are removed with its registration (`unregister_worker`) and when
//! its leases are recovered (`recover_owner`).

mod dependents;
mod notes;
mod target;

use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::job::{JobId, JobState};
use crate::zookeeper::lease::TRIES;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::session::{is_definite, lost_a_race, source};
use crate::zookeeper::ZooKeeperBoard;
use target::{Guard, Place, Target};

/// Most jobs one cancel takes (one transaction, within ZooKeeper's
/// default 1 MB request limit).
const MAX_CANCEL: usize = 500;

/// Stages the cancel of `t` (job `uuid`): its lock deleted at the version
/// read (or proven absent) and its job znode deleted at the version read,
/// or its waiting entry deleted; the record saying cancelled, the history
/// entry, the owner's note and the check that no dependent came meanwhile.
fn stage(
    w: &mut zk::MultiWriter<'_>,
    paths: &QueuePaths,
    uuid: &str,
    t: &Target,
    note: Option<&str>,
    persistent: &zk::CreateOptions<'_>,
) -> Result<(), zk::Error> {
    match &t.place {
        Place::Listed {
            znode,
            job_version,
            lock_version,
        } => {
            let lock = paths.lock(znode);
            match lock_version {
                Some(v) => w.add_delete(&lock, Some(*v))?,
                // No lock may appear before this commits.
                None => {
                    w.add_create(&lock, b"", persistent)?;
                    w.add_delete(&lock, None)?;
                }
            }
            w.add_delete(&paths.job(znode), Some(*job_version))?;
        }
        Place::Waiting { version } => w.add_delete(&paths.waiting_entry(uuid), Some(*version))?,
    }
    let record = paths.record(uuid);
    match t.record_version {
        Some(v) => w.add_set_data(&record, &t.record.to_bytes(), Some(v))?,
        None => w.add_create(&record, &t.record.to_bytes(), persistent)?,
    }
    if let Some(h) = &t.history {
        w.add_create(h, b"", persistent)?;
    }
    if let Some(n) = note {
        w.add_create(n, b"", persistent)?;
    }
    match t.dependents {
        Guard::Unflagged => {}
        Guard::Version(v) => w.add_check_version(&paths.dependents_of(uuid), v)?,
        Guard::Absent => {
            let dir = paths.dependents_of(uuid);
            w.add_create(&dir, b"", persistent)?;
            w.add_delete(&dir, None)?;
        }
    }
    Ok(())
}

/// What one cancel transaction did.
enum Tried {
    /// Committed.
    Done,
    /// Something changed between the reads and the transaction: read again.
    Again,
    /// The answer was lost: it may have landed; read again.
    Unknown,
}

impl ZooKeeperBoard {
    /// cancel: nothing unless every job can be cancelled (each is live);
    /// then all of them in one transaction, so a job that finishes
    /// meanwhile fails the whole cancel. Returns the (queue, job) pairs
    /// cancelled.
    pub(crate) async fn cancel_jobs(&self, queue: &str, ids: &[JobId]) -> Result<Vec<(String, JobId)>> {
        let paths = self.paths(queue)?;
        let mut unique: Vec<&JobId> = Vec::with_capacity(ids.len());
        for id in ids {
            paths::validate_job_id(id.as_str())?;
            if !unique.contains(&id) {
                unique.push(id);
            }
        }
        if unique.len() > MAX_CANCEL {
            return Err(Error::invalid(format!(
                "cannot cancel {} jobs at once on zookeeper (one transaction): at most {MAX_CANCEL}",
                unique.len()
            )));
        }
        for id in &unique {
            let state = self.show_job(queue, id.as_str()).await?.state;
            if matches!(
                state,
                JobState::Completed | JobState::Trashed | JobState::Cancelled
            ) {
                return Err(Error::finished(queue, id.as_str(), &state.to_string()));
            }
        }
        let uuids: Vec<&str> = unique.iter().map(|id| id.as_str()).collect();
        self.cancel_all(&paths, &uuids).await?;
        Ok(unique
            .into_iter()
            .map(|id| (queue.to_owned(), id.clone()))
            .collect())
    }

    async fn cancel_all(&self, paths: &QueuePaths, uuids: &[&str]) -> Result<()> {
        let what = match uuids {
            [one] => format!("cannot cancel job {one} in queue {}", paths.queue),
            _ => format!("cannot cancel {} jobs in queue {}", uuids.len(), paths.queue),
        };
        let mut committed = false;
        for _ in 0..TRIES {
            let mut targets = Vec::with_capacity(uuids.len());
            for uuid in uuids {
                match self.read_target(paths, uuid, &what).await? {
                    Some(mut target) => {
                        target.dependents = self.no_live_dependents(paths, uuid, &target.record).await?;
                        targets.push((*uuid, target));
                    }
                    None => return self.gone(paths, uuids, uuid, committed).await,
                }
            }
            match self.commit_cancel(paths, &targets, &what).await? {
                Tried::Done => return Ok(()),
                Tried::Again => {}
                Tried::Unknown => committed = true,
            }
        }
        Err(self.keeps_changing(&what))
    }

    /// Job `uuid` left the jobs path before the cancel committed: the
    /// cancel is refused, unless it is a commit whose answer was lost that
    /// landed (then every job is cancelled).
    async fn gone(&self, paths: &QueuePaths, uuids: &[&str], uuid: &str, committed: bool) -> Result<()> {
        let state = self.show_job(&paths.queue, uuid).await?.state;
        if committed && state == JobState::Cancelled {
            let mut all = true;
            for other in uuids {
                all &= self.show_job(&paths.queue, other).await?.state == JobState::Cancelled;
            }
            if all {
                return Ok(());
            }
        }
        Err(Error::finished(&paths.queue, uuid, &state.to_string()))
    }

    /// Commits the cancel of every target in one transaction (see the
    /// module docs).
    async fn commit_cancel(
        &self,
        paths: &QueuePaths,
        targets: &[(&str, Target)],
        what: &str,
    ) -> Result<Tried> {
        let client = self.client(what).await?;
        let persistent = &self.session().access().persistent();
        let mut dirs: Vec<String> = Vec::new();
        for (_, t) in targets {
            for made in [&t.history, &t.note].into_iter().flatten() {
                let dir = paths::parent(made).to_owned();
                if !dirs.contains(&dir) {
                    dirs.push(dir);
                }
            }
        }
        for dir in &dirs {
            client
                .mkdir(dir, persistent)
                .await
                .map_err(|e| self.session().error(what, &e))?;
        }
        let mut w = client.new_multi_writer();
        for (uuid, t) in targets {
            // A note of this job not read yet (a cancel racing this one)
            // tells the owner as well: none is written again.
            let note = match &t.note {
                Some(note) => match client.check_stat(note).await {
                    Ok(None) => Some(note),
                    Ok(Some(_)) => None,
                    Err(e) => return Err(self.session().error(what, &e)),
                },
                None => None,
            };
            stage(&mut w, paths, uuid, t, note.map(String::as_str), persistent)
                .map_err(|e| self.session().error(what, &e))?;
        }
        match w.commit().await {
            Ok(_) => {
                for (uuid, t) in targets {
                    if let Some(znode) = t.znode() {
                        self.inner.cache.forget(&paths.queue, znode);
                    }
                    self.emit(&paths.queue, uuid, &t.record.fresh);
                    if let Some(at) = t.delayed {
                        let _ = client.delete(&paths.delayed_entry(uuid, at), None).await;
                    }
                    // A suspect's entry, if it was one (best effort: an
                    // entry without its job is passed over by claims).
                    let _ = client.delete(&paths.suspect_entry(uuid), None).await;
                    if t.record.dependents {
                        // Gone once every dependent left it (not empty: kept).
                        let _ = client.delete(&paths.dependents_of(uuid), None).await;
                    }
                    self.unlink_dependencies(&paths.queue, uuid, &t.record).await;
                }
                Ok(Tried::Done)
            }
            // A claim, a finish or a recovery came first: read again.
            Err(e) if lost_a_race(&e) => Ok(Tried::Again),
            Err(e) if is_definite(source(&e)) => Err(self.session().error(what, source(&e))),
            Err(_) => Ok(Tried::Unknown),
        }
    }
}
