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
//! Each worker watches its notes directory (a child watch, re-armed after
//! every listing and after a reconnect), hands each note's job id to its
//! heartbeat, which stops the handler, and deletes the note. A worker that
//! misses its note learns at its next extend, which is refused as
//! cancelled (the record says so). Notes of a worker that stopped are
//! removed with its registration (`unregister_worker`) and when its leases
//! are recovered (`recover_owner`).

use futures_util::StreamExt;
use zookeeper_client as zk;

use crate::board::CancelStream;
use crate::error::{Error, Result};
use crate::job::{JobId, JobState};
use crate::zookeeper::lease::TRIES;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::record::{Ending, JobRecord, LockBody};
use crate::zookeeper::retention::hour_of;
use crate::zookeeper::session::{is_definite, lost_a_race, source};
use crate::zookeeper::wait::reconnected;
use crate::zookeeper::ZooKeeperBoard;

/// The pause before a worker lists its cancel notes again after a failure.
const RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// Most jobs one cancel takes (one transaction, within ZooKeeper's
/// default 1 MB request limit).
const MAX_CANCEL: usize = 500;

/// Stages the cancel of `t` (job `uuid`): its lock deleted at the version
/// read (or proven absent), its job znode deleted at the version read, the
/// record saying cancelled, the history entry and the owner's note.
fn stage(
    w: &mut zk::MultiWriter<'_>,
    paths: &QueuePaths,
    uuid: &str,
    t: &Target,
    note: Option<&str>,
    persistent: &zk::CreateOptions<'_>,
) -> Result<(), zk::Error> {
    let lock = paths.lock(&t.znode);
    match t.lock_version {
        Some(v) => w.add_delete(&lock, Some(v))?,
        // No lock may appear before this commits.
        None => {
            w.add_create(&lock, b"", persistent)?;
            w.add_delete(&lock, None)?;
        }
    }
    w.add_delete(&paths.job(&t.znode), Some(t.job_version))?;
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

/// A job to cancel, as read, and the record to write.
struct Target {
    /// The job znode's name and version.
    znode: String,
    job_version: i32,
    /// The lock's version, when the job is claimed.
    lock_version: Option<i32>,
    /// The record saying cancelled, and the version to write it at
    /// (`None`: create it).
    record: JobRecord,
    record_version: Option<i32>,
    /// The due time of its delayed entry, to remove once cancelled.
    delayed: Option<i64>,
    /// The history entry to create (`None`: there is one already).
    history: Option<String>,
    /// The note telling the lock's owner, when a worker held it.
    note: Option<String>,
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
                    Some(target) => targets.push((*uuid, target)),
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

    /// Reads the job, its lock and its record: what a cancel changes.
    /// `None` when the job is no longer on the jobs path.
    async fn read_target(&self, paths: &QueuePaths, uuid: &str, what: &str) -> Result<Option<Target>> {
        let q = &paths.queue;
        let Some(znode) = self.locate(paths, uuid).await? else {
            return Ok(None);
        };
        let now = self.now_ms();
        let history = paths.cancelled_entry(hour_of(now), uuid);
        let reads = vec![
            paths.job(&znode),
            paths.lock(&znode),
            paths.record(uuid),
            history.clone(),
        ];
        let mut reads = self.read_many(what, reads).await?.into_iter();
        let (job, lock, record) = (
            reads.next().flatten(),
            reads.next().flatten(),
            reads.next().flatten(),
        );
        // An entry of this id in this hour: it was posted again since.
        let in_history = reads.next().flatten().is_some();
        let Some((_, job_stat)) = job else {
            self.inner.cache.forget(q, &znode);
            self.inner.cache.unlocate(q, uuid);
            return Ok(None);
        };
        // A record nobody can decode is written anew at its version (it
        // would otherwise block the cancel for good).
        let (mut record, record_version) = match record {
            Some((d, stat)) => (JobRecord::from_bytes(&d).unwrap_or_default(), Some(stat.version)),
            None => (JobRecord::default(), None),
        };
        let delayed = (record.run_at_ms > 0).then_some(record.run_at_ms);
        record.job = Some(znode.clone());
        record.ending = Ending::Cancelled;
        record.finished_ms = Some(now);
        record.run_at_ms = 0;
        if let Some((d, stat)) = &lock {
            record.log_claim(LockBody::parse(d).owner.as_deref(), stat.czxid as u64, stat.ctime);
        }
        record.log(now, "cancelled", serde_json::json!({}));
        // Only jobworker's claims carry a claim id: a taskflow conductor
        // reads no notes (it learns when its consume fails).
        let note = lock
            .as_ref()
            .map(|(d, _)| LockBody::parse(d))
            .filter(|body| body.claim_id.is_some())
            .and_then(|body| body.owner)
            .filter(|o| paths::validate_owner(o).is_ok())
            .map(|o| format!("{}/{uuid}", paths::cancel_notes(self.root(), &o)));
        Ok(Some(Target {
            znode,
            job_version: job_stat.version,
            lock_version: lock.map(|(_, stat)| stat.version),
            record,
            record_version,
            delayed,
            history: (!in_history).then_some(history),
            note,
        }))
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
                    self.inner.cache.forget(&paths.queue, &t.znode);
                    self.emit(&paths.queue, uuid, &t.record.fresh);
                    if let Some(at) = t.delayed {
                        let _ = client.delete(&paths.delayed_entry(uuid, at), None).await;
                    }
                }
                Ok(Tried::Done)
            }
            // A claim, a finish or a recovery came first: read again.
            Err(e) if lost_a_race(&e) => Ok(Tried::Again),
            Err(e) if is_definite(source(&e)) => Err(self.session().error(what, source(&e))),
            Err(_) => Ok(Tried::Unknown),
        }
    }

    /// The ids of jobs cancelled while `owner` held them, from now on (and
    /// those whose notes are there already); each note is deleted once
    /// read. See the module docs.
    pub(crate) async fn cancel_notes_of(&self, owner: &str) -> Result<CancelStream> {
        paths::validate_owner(owner)?;
        let dir = paths::cancel_notes(self.root(), owner);
        let what = format!("cannot watch the cancels of worker {owner}");
        let client = self.client(&what).await?;
        client
            .mkdir(&dir, &self.session().access().persistent())
            .await
            .map_err(|e| self.session().error(&what, &e))?;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let board = self.clone();
        self.session().runtime().spawn(async move {
            tokio::select! {
                _ = board.watch_notes(&dir, &tx) => {}
                _ = tx.closed() => {}
            }
        });
        let stream =
            futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|id| (id, rx)) });
        Ok(stream.boxed())
    }

    /// Lists `dir` with a watch, sends and deletes each note, waits for the
    /// watch (or a reconnect), again; until the receiver is gone.
    async fn watch_notes(&self, dir: &str, tx: &tokio::sync::mpsc::UnboundedSender<String>) {
        loop {
            let Ok(client) = self.session().client().await else {
                tokio::time::sleep(RETRY).await;
                continue;
            };
            let mut states = client.state_watcher();
            let watcher = match client.list_and_watch_children(dir).await {
                Ok((notes, watcher)) => {
                    for note in notes {
                        if tx.send(note.clone()).is_err() {
                            return;
                        }
                        let _ = client.delete(&format!("{dir}/{note}"), None).await;
                    }
                    Some(watcher)
                }
                // Removed (its worker stopped, or was recovered): wait for
                // a canceller to make it again.
                Err(zk::Error::NoNode) => match client.check_and_watch_stat(dir).await {
                    Ok((_, watcher)) => Some(watcher),
                    Err(_) => None,
                },
                Err(e) => {
                    tracing::debug!(error = %e, dir, "cannot list the cancel notes; trying again");
                    None
                }
            };
            match watcher {
                Some(watcher) => tokio::select! {
                    _ = watcher.changed() => {}
                    _ = reconnected(&mut states) => {}
                },
                None => tokio::time::sleep(RETRY).await,
            }
        }
    }

    /// Removes the cancel notes of `owner` (it stopped, or its leases were
    /// recovered); best effort.
    pub(crate) async fn drop_cancel_notes(&self, owner: &str) {
        if paths::validate_owner(owner).is_err() {
            return;
        }
        let dir = paths::cancel_notes(self.root(), owner);
        let Ok(client) = self.session().client().await else {
            return;
        };
        if let Ok(notes) = client.list_children(&dir).await {
            for note in notes {
                let _ = client.delete(&format!("{dir}/{note}"), None).await;
            }
            let _ = client.delete(&dir, None).await;
        }
    }
}
