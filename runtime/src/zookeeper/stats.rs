//! Statistics and per-minute throughput on ZooKeeper, from the tally
//! (`tally.rs`).
//!
//! A read takes the day summaries it needs and the entries not folded yet
//! in one multi-read, a consistent snapshot: a fold commits wholly before
//! or after it, so no entry is counted twice or missed. A fold moves the
//! oldest entries into their days' summaries in one transaction: each
//! summary written at the version read, each entry deleted, so of racing
//! folders one commits and the others read again. Any board folds: in the
//! background once it ended [`FOLD_EVERY`] claims of the queue, and when it
//! prunes the queue's history (claims and reap, about once a minute), so
//! the tally stays short however many boards write it. Summaries older
//! than [`DAYS_KEPT`] days go at folds.

use zookeeper_client as zk;

use crate::board::{Minute, MAX_MINUTES};
use crate::error::Result;
use crate::stats::{QueueStats, DAY_MS};
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::session::{failed_op, is_definite, source};
use crate::zookeeper::tally::{Summary, Tally, DAYS_KEPT};
use crate::zookeeper::ZooKeeperBoard;

/// Claims a board ends in a queue before it folds the queue's tally.
pub(crate) const FOLD_EVERY: usize = 500;
/// Entries one fold transaction moves at most (well under ZooKeeper's
/// 1 MiB request limit).
const FOLD_BATCH: usize = 1_000;
/// Transactions one fold commits at most (a backlog left is folded next
/// time).
const FOLD_ROUNDS: usize = 20;

/// The day summaries read (each with its version, `None`: none yet) and
/// the tally's entries, from one snapshot.
struct Snapshot {
    days: Vec<(Summary, Option<i32>)>,
    entries: Vec<(String, Tally)>,
}

impl ZooKeeperBoard {
    /// Statistics of `queue` for `day` (days since the epoch, UTC; `None`:
    /// today on the server's clock).
    pub(crate) async fn queue_stats(&self, queue: &str, day: Option<i64>) -> Result<QueueStats> {
        let paths = self.paths(queue)?;
        let day = day.unwrap_or_else(|| self.now_ms().div_euclid(DAY_MS));
        let snap = self.tally_snapshot(&paths, &[day]).await?;
        let mut summary = snap.days.into_iter().next().map(|(s, _)| s).unwrap_or_default();
        for (_, t) in snap.entries.iter().filter(|(_, t)| t.day() == day) {
            summary.add(t);
        }
        Ok(summary.stats(queue, day))
    }

    /// Jobs completed and trashed in each of the last `minutes` minutes
    /// (at most two hours), oldest first.
    pub(crate) async fn queue_throughput(&self, queue: &str, minutes: usize) -> Result<Vec<Minute>> {
        let paths = self.paths(queue)?;
        let minutes = minutes.clamp(1, MAX_MINUTES) as i64;
        let now = self.now_ms().div_euclid(60_000);
        let first = now - minutes + 1;
        let day_of = |minute: i64| (minute * 60_000).div_euclid(DAY_MS);
        let days: Vec<i64> = (day_of(first)..=day_of(now)).collect();
        let snap = self.tally_snapshot(&paths, &days).await?;
        let mut summaries: Vec<Summary> = snap.days.into_iter().map(|(s, _)| s).collect();
        for (_, t) in &snap.entries {
            if let Some(i) = days.iter().position(|d| *d == t.day()) {
                summaries[i].add(t);
            }
        }
        Ok((first..=now)
            .map(|m| {
                let i = days.iter().position(|d| *d == day_of(m)).unwrap_or(0);
                summaries[i].minute(m)
            })
            .collect())
    }

    /// The summaries of `days` and the tally's entries, in one multi-read.
    async fn tally_snapshot(&self, paths: &QueuePaths, days: &[i64]) -> Result<Snapshot> {
        let what = format!("cannot read the statistics of queue {}", paths.queue);
        let read = self
            .read(&what, |client| {
                let (days, tally) = (days.iter().map(|d| paths.stats_day(*d)), paths.tally.clone());
                let days: Vec<String> = days.collect();
                async move {
                    let mut reader = client.new_multi_reader();
                    for day in &days {
                        reader.add_get_data(day)?;
                    }
                    reader.add_get_children(&tally)?;
                    reader.commit().await
                }
            })
            .await?
            .map_err(|e| self.session().error(&what, &e))?;
        let mut snap = Snapshot {
            days: Vec::new(),
            entries: Vec::new(),
        };
        for result in read {
            match result {
                zk::MultiReadResult::Data { data, stat } => snap
                    .days
                    .push((Summary::parse(&data, &paths.queue), Some(stat.version))),
                zk::MultiReadResult::Children { children } => {
                    snap.entries = children
                        .into_iter()
                        .filter_map(|name| Tally::parse(&name).map(|t| (name, t)))
                        .collect()
                }
                zk::MultiReadResult::Error {
                    err: zk::Error::NoNode,
                } if snap.days.len() < days.len() => snap.days.push((Summary::default(), None)),
                zk::MultiReadResult::Error {
                    err: zk::Error::NoNode,
                } => {}
                zk::MultiReadResult::Error { err } => return Err(self.session().error(&what, &err)),
                _ => {}
            }
        }
        Ok(snap)
    }

    /// Folds the queue's tally into its day summaries (see the module
    /// docs) and drops summaries past their days; returns the entries
    /// folded.
    pub(crate) async fn fold_tally(&self, paths: &QueuePaths) -> Result<usize> {
        let what = format!("cannot fold the statistics of queue {}", paths.queue);
        let mut folded = 0;
        for _ in 0..FOLD_ROUNDS {
            let entries = self.tally_snapshot(paths, &[]).await?.entries;
            if entries.is_empty() {
                break;
            }
            let more = entries.len() > FOLD_BATCH;
            let mut batch = entries;
            // Oldest first by sequence number (the name's last part).
            batch.sort_by(|a, b| a.0.rsplit('-').next().cmp(&b.0.rsplit('-').next()));
            batch.truncate(FOLD_BATCH);
            let mut days: Vec<i64> = batch.iter().map(|(_, t)| t.day()).collect();
            days.sort_unstable();
            days.dedup();
            let mut snap = self.tally_snapshot(paths, &days).await?;
            for (_, t) in &batch {
                let i = days.iter().position(|d| *d == t.day()).unwrap_or(0);
                snap.days[i].0.add(t);
            }
            let client = self.client(&what).await?;
            let access = self.session().access();
            let mut w = client.new_multi_writer();
            let mut staged = Ok(());
            for (day, (summary, version)) in days.iter().zip(&snap.days) {
                let path = paths.stats_day(*day);
                staged = staged.and_then(|_| match version {
                    Some(v) => w.add_set_data(&path, &summary.to_bytes(), Some(*v)),
                    None => w.add_create(&path, &summary.to_bytes(), &access.persistent()),
                });
            }
            for (name, _) in &batch {
                staged = staged.and_then(|_| w.add_delete(&paths.tally_entry(name), None));
            }
            staged.map_err(|e| self.session().error(&what, &e))?;
            match w.commit().await {
                Ok(_) => {
                    folded += batch.len();
                    if !more {
                        break;
                    }
                }
                Err(e) => match failed_op(&e) {
                    // The stats directory is not there yet.
                    Some((i, zk::Error::NoNode)) if i < days.len() => {
                        let _ = client.create(&paths.stats, b"", &access.persistent()).await;
                    }
                    // A racing fold: read again.
                    Some((_, zk::Error::NoNode | zk::Error::BadVersion | zk::Error::NodeExists)) => {}
                    _ if is_definite(source(&e)) => return Err(self.session().error(&what, source(&e))),
                    // Unknown outcome: the next snapshot tells.
                    _ => {}
                },
            }
        }
        self.drop_old_days(paths).await;
        Ok(folded)
    }

    /// Deletes day summaries older than [`DAYS_KEPT`] days (best effort).
    async fn drop_old_days(&self, paths: &QueuePaths) {
        let Some(client) = self.session().current() else {
            return;
        };
        let Ok(days) = client.list_children(&paths.stats).await else {
            return;
        };
        let today = self.now_ms().div_euclid(DAY_MS);
        for day in days.iter().filter_map(|d| d.parse::<i64>().ok()) {
            if day <= today - DAYS_KEPT {
                let _ = client.delete(&paths.stats_day(day), None).await;
            }
        }
    }

    /// Counts a claim this board ended in `paths`' queue; folds the tally
    /// in the background every [`FOLD_EVERY`] of them.
    pub(crate) fn tallied(&self, paths: &QueuePaths) {
        if !self.fold_due(&paths.queue) {
            return;
        }
        let (board, paths) = (self.clone(), paths.clone());
        self.session().runtime().spawn(async move {
            if let Err(e) = board.fold_tally(&paths).await {
                tracing::warn!(queue = %paths.queue, error = %e, "cannot fold the statistics");
            }
        });
    }
}
