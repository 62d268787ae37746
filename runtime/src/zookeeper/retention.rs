//! Retention on the ZooKeeper board: the completed history and the trash
//! (dead letter) are kept within their counts and ages, pruned by claims and
//! reap (the maintenance path), at most about once a minute per queue and
//! board.

use std::time::{Duration, Instant};

use zookeeper_client as zk;

use crate::error::Result;
use crate::zookeeper::cache::READ_BATCH;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::posting;
use crate::zookeeper::record::{Ending, JobRecord};
use crate::zookeeper::session::{is_definite, source};
use crate::zookeeper::stats::FOLD_EVERY;
use crate::zookeeper::ZooKeeperBoard;

/// How often one board prunes a queue's history at least (from reap or a
/// claim).
const PRUNE_INTERVAL: Duration = Duration::from_secs(60);
/// Least time between two prunes started by claims, however many jobs the
/// board consumed meanwhile.
const CLAIM_PRUNE_GAP: Duration = Duration::from_secs(1);
/// One hour in ms: the width of a history bucket.
pub(crate) const HOUR_MS: i64 = 3_600_000;
/// How often a board checks the ages in a queue's trash (its count is
/// checked at every prune).
const TRASH_AGE_CHECK: Duration = Duration::from_secs(600);

/// When a board last pruned a queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pruned {
    /// When it last pruned the history.
    at: Instant,
    /// Jobs it consumed (each adding a history entry) since.
    consumed: usize,
    /// When it last checked the ages in the trash.
    trash_checked: Option<Instant>,
    /// Claims it ended (each a tally entry) since it last folded the tally.
    tallied: usize,
}

impl Pruned {
    fn new() -> Pruned {
        Pruned {
            at: Instant::now(),
            consumed: 0,
            trash_checked: None,
            tallied: 0,
        }
    }
}

impl ZooKeeperBoard {
    /// True (and remembered) when the queue's history is due for pruning:
    /// the first time, then every [`PRUNE_INTERVAL`]; for reap also when
    /// this board consumed a job since; for a claim also once this board
    /// consumed a tenth of `history_count` jobs since (at most every
    /// [`CLAIM_PRUNE_GAP`]), so the history of a queue whose workers never
    /// reap stays near its limit.
    pub(crate) fn prune_due(&self, queue: &str, from_claim: bool) -> bool {
        let Ok(mut pruned) = self.inner.pruned.lock() else {
            return false;
        };
        let every = (self.inner.opts.history_count / 10).max(1);
        let due = match pruned.get(queue) {
            None => true,
            Some(p) => {
                let elapsed = p.at.elapsed();
                let claim_due = p.consumed >= every && elapsed >= CLAIM_PRUNE_GAP;
                elapsed >= PRUNE_INTERVAL || if from_claim { claim_due } else { p.consumed > 0 }
            }
        };
        if due {
            let p = pruned.entry(queue.to_owned()).or_insert_with(Pruned::new);
            p.at = Instant::now();
            p.consumed = 0;
        }
        due
    }

    /// Counts a job this board consumed into `queue`'s history.
    pub(crate) fn count_consumed(&self, queue: &str) {
        if let Ok(mut pruned) = self.inner.pruned.lock() {
            pruned
                .entry(queue.to_owned())
                .or_insert_with(Pruned::new)
                .consumed += 1;
        }
    }

    /// Counts a tally entry this board wrote in `queue`: true (and the
    /// count reset) once it wrote [`FOLD_EVERY`] since it last folded.
    pub(crate) fn fold_due(&self, queue: &str) -> bool {
        let Ok(mut pruned) = self.inner.pruned.lock() else {
            return false;
        };
        let p = pruned.entry(queue.to_owned()).or_insert_with(Pruned::new);
        p.tallied += 1;
        let due = p.tallied >= FOLD_EVERY;
        if due {
            p.tallied = 0;
        }
        due
    }

    /// Prunes `queue`'s history and trash in the background when due (see
    /// [`ZooKeeperBoard::prune_due`]); claims call it.
    pub(crate) fn prune_from_claim(&self, paths: &QueuePaths) {
        if !self.prune_due(&paths.queue, true) {
            return;
        }
        let (board, paths) = (self.clone(), paths.clone());
        self.session()
            .runtime()
            .spawn(async move { board.prune(&paths).await });
    }

    /// Folds the statistics' tally, prunes the completed history, and the
    /// trash when it is over its count or its age is due for a check;
    /// failures are logged (the next prune tries again).
    pub(crate) async fn prune(&self, paths: &QueuePaths) {
        if let Err(e) = self.fold_tally(paths).await {
            tracing::warn!(queue = %paths.queue, error = %e, "cannot fold the statistics");
        }
        if let Err(e) = self.prune_history(paths).await {
            tracing::warn!(queue = %paths.queue, error = %e, "cannot prune the completed history");
        }
        if let Err(e) = self.prune_trash(paths).await {
            tracing::warn!(queue = %paths.queue, error = %e, "cannot prune the trash");
        }
    }

    /// Keeps the completed history within `history_count` jobs and
    /// `history_age`: drops the oldest hourly buckets (and the records of
    /// the jobs in them that are still completed).
    pub(crate) async fn prune_history(&self, paths: &QueuePaths) -> Result<usize> {
        let what = format!("cannot prune the history of queue {}", paths.queue);
        let history = paths.history.clone();
        let listed = self
            .read(&what, |client| {
                let history = history.clone();
                async move { client.list_children(&history).await }
            })
            .await?;
        let mut hours: Vec<i64> = match listed {
            Ok(children) => children.iter().filter_map(|c| c.parse().ok()).collect(),
            Err(zk::Error::NoNode) => return Ok(0),
            Err(e) => return Err(self.session().error(&what, &e)),
        };
        hours.sort_unstable();
        let stats = self
            .read_many(&what, hours.iter().map(|h| paths.history_bucket(*h)).collect())
            .await?;
        let sizes: Vec<usize> = stats
            .iter()
            .map(|s| {
                s.as_ref()
                    .map_or(0, |(_, stat)| stat.num_children.max(0) as usize)
            })
            .collect();
        let total: usize = sizes.iter().sum();
        let mut excess = total.saturating_sub(self.inner.opts.history_count);
        let cutoff = self.now_ms() - self.inner.opts.history_age.as_millis() as i64;
        let mut removed = 0;
        for (hour, size) in hours.iter().zip(sizes) {
            let expired = (hour + 1) * HOUR_MS <= cutoff;
            if !expired && excess == 0 {
                break;
            }
            let take = if expired { size } else { excess.min(size) };
            let n = self.drop_bucket_entries(paths, *hour, take).await?;
            removed += n;
            excess = excess.saturating_sub(n);
        }
        Ok(removed)
    }

    /// Drops up to `take` entries of one history bucket (and the bucket when
    /// it empties).
    async fn drop_bucket_entries(&self, paths: &QueuePaths, hour: i64, take: usize) -> Result<usize> {
        let what = format!("cannot prune the history of queue {}", paths.queue);
        let client = self.client(&what).await?;
        let bucket = paths.history_bucket(hour);
        let uuids = match client.list_children(&bucket).await {
            Ok(c) => c,
            Err(zk::Error::NoNode) => return Ok(0),
            Err(e) => return Err(self.session().error(&what, &e)),
        };
        let all = uuids.len();
        let records = self
            .read_many(
                &what,
                uuids
                    .iter()
                    .map(|u| paths.record(paths::history_job(u).0))
                    .collect(),
            )
            .await?;
        // Oldest first: (finished, uuid, record version and tags if still
        // completed).
        let mut entries: Vec<(i64, String, Option<Doomed>)> = uuids
            .into_iter()
            .zip(records)
            .map(|(uuid, found)| {
                let record = found.and_then(|(d, stat)| JobRecord::from_bytes(&d).map(|r| (r, stat.version)));
                match record {
                    Some((r, v)) if matches!(r.ending, Ending::Completed | Ending::Cancelled) => {
                        (r.finished_ms.unwrap_or(0), uuid, Some((v, r.tags)))
                    }
                    _ => (0, uuid, None),
                }
            })
            .collect();
        entries.sort();
        entries.truncate(take);
        let mut dropped = 0;
        for chunk in entries.chunks(READ_BATCH) {
            let mut ops = Vec::new();
            for (_, uuid, version) in chunk {
                let mut w = client.new_multi_writer();
                let mut staged = w.add_delete(&paths.history_entry(hour, uuid), None);
                if let Some((v, _)) = version {
                    let record = paths.record(paths::history_job(uuid).0);
                    staged = staged.and_then(|_| w.add_delete(&record, Some(*v)));
                }
                staged.map_err(|e| self.session().error(&what, &e))?;
                ops.push(w.commit());
            }
            for (result, (_, uuid, version)) in
                futures_util::future::join_all(ops).await.into_iter().zip(chunk)
            {
                match result {
                    Ok(_) => {
                        dropped += 1;
                        if let Some((_, tags)) = version {
                            self.drop_index_entries(paths, paths::history_job(uuid).0, tags)
                                .await;
                        }
                    }
                    Err(e) if is_definite(source(&e)) => {}
                    Err(e) => return Err(self.session().error(&what, source(&e))),
                }
            }
        }
        if dropped >= all {
            let _ = client.delete(&bucket, None).await;
        }
        Ok(dropped)
    }

    /// Keeps the trash (the dead letter) within `trash_count` jobs and
    /// `trash_age`, oldest first by trash time (the trash copy's creation
    /// time). A cheap count decides whether to look at every entry: when
    /// there are too many, or every [`TRASH_AGE_CHECK`] for the age. Only
    /// jobs trashed through jobworker go (their record says so), with their
    /// record; taskflow's own trashed jobs are left to taskflow.
    pub(crate) async fn prune_trash(&self, paths: &QueuePaths) -> Result<usize> {
        let what = format!("cannot prune the trash of queue {}", paths.queue);
        let trash = paths.trash.clone();
        let stat = self
            .read(&what, |client| {
                let trash = trash.clone();
                async move { client.check_stat(&trash).await }
            })
            .await?
            .map_err(|e| self.session().error(&what, &e))?;
        let Some(stat) = stat else { return Ok(0) };
        let over = stat.num_children.max(0) as usize > self.inner.opts.trash_count;
        if !over && !self.trash_age_due(&paths.queue) {
            return Ok(0);
        }
        let names = self.children(&what, &paths.trash).await?;
        let copies = self
            .read_many(&what, names.iter().map(|n| paths.trashed(n)).collect())
            .await?;
        // Oldest first: (trash time, copy name, job id).
        let mut entries: Vec<(i64, &String, String)> = names
            .iter()
            .zip(copies)
            .filter_map(|(name, copy)| {
                let (data, stat) = copy?;
                let uuid = posting::decode(&data).ok()?.uuid;
                Some((stat.ctime, name, uuid))
            })
            .collect();
        entries.sort();
        let cutoff = self.now_ms() - self.inner.opts.trash_age.as_millis() as i64;
        let excess = names.len().saturating_sub(self.inner.opts.trash_count);
        let doomed: Vec<&(i64, &String, String)> = entries
            .iter()
            .enumerate()
            .filter(|(i, (ctime, _, _))| *i < excess || *ctime <= cutoff)
            .map(|(_, e)| e)
            .collect();
        let records = self
            .read_many(
                &what,
                doomed.iter().map(|(_, _, uuid)| paths.record(uuid)).collect(),
            )
            .await?;
        let client = self.client(&what).await?;
        let mut removed = 0;
        for ((_, name, uuid), record) in doomed.into_iter().zip(records) {
            let Some((data, stat)) = record else { continue };
            let Some(r) = JobRecord::from_bytes(&data) else {
                continue;
            };
            let ours = r.ending == Ending::Trashed && r.job.as_deref().is_some_and(|j| name.starts_with(j));
            if !ours {
                continue;
            }
            let mut w = client.new_multi_writer();
            w.add_delete(&paths.trashed(name), None)
                .and_then(|_| w.add_delete(&paths.record(uuid), Some(stat.version)))
                .map_err(|e| self.session().error(&what, &e))?;
            match w.commit().await {
                Ok(_) => {
                    removed += 1;
                    self.drop_index_entries(paths, uuid, &r.tags).await;
                }
                Err(e) if is_definite(source(&e)) => {}
                Err(e) => return Err(self.session().error(&what, source(&e))),
            }
        }
        Ok(removed)
    }

    /// True (and remembered) when `queue`'s trash is due for an age check.
    fn trash_age_due(&self, queue: &str) -> bool {
        let Ok(mut pruned) = self.inner.pruned.lock() else {
            return false;
        };
        let p = pruned.entry(queue.to_owned()).or_insert_with(Pruned::new);
        let due = p.trash_checked.is_none_or(|t| t.elapsed() >= TRASH_AGE_CHECK);
        if due {
            p.trash_checked = Some(Instant::now());
        }
        due
    }
}

/// A finished job's record about to go: its version and tags.
type Doomed = (i32, Vec<String>);

/// The history bucket (hour since the epoch) of a time in ms.
pub(crate) fn hour_of(ms: i64) -> i64 {
    ms.div_euclid(HOUR_MS)
}
