//! Reading job postings into the cache: batched multi-reads, the postings
//! a listing shows, and the quarantine of znodes nobody can decode.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use zookeeper_client as zk;

use super::Snapshot;
use super::{Known, QueueCache, Seen, READ_BATCH, UNLISTED_SLACK};
use crate::error::Result;
use crate::job::Priority;
use crate::zookeeper::paths::{self, QueuePaths};
use crate::zookeeper::posting;
use crate::zookeeper::record::JobRecord;
use crate::zookeeper::ZooKeeperBoard;

impl ZooKeeperBoard {
    /// The usable postings of `snap`'s jobs, in listing order, reading (in
    /// batches) those not cached yet; forgets cached znodes the listing no
    /// longer shows, and quarantines znodes taskflow cannot read either.
    /// A long queue is listed at every claim, so this costs a lookup per
    /// listed job: the znodes gone since (consumed elsewhere) are forgotten
    /// once they are more than an eighth of the listing and more than
    /// [`UNLISTED_SLACK`]. Until then they stay cached; a lookup by uuid
    /// finds such a znode gone, as it can between any two listings.
    pub(crate) async fn known(&self, paths: &QueuePaths, snap: &Snapshot) -> Result<Vec<Arc<Known>>> {
        let q = &paths.queue;
        // Per listed job, its posting; `None` for one to read (its place in
        // `missing`) or one jobworker cannot use.
        let mut slots: Vec<Option<Arc<Known>>> = Vec::with_capacity(snap.jobs.len());
        let mut missing: Vec<usize> = Vec::new();
        self.inner.cache.with(q, |c| {
            if snap.jobs_made.is_some() && snap.jobs_made != c.jobs_made {
                if c.jobs_made.is_some() {
                    // The jobs path was made again (outside jobworker): its
                    // names started over, so a cached one may be another
                    // job's now.
                    *c = QueueCache::default();
                }
                c.jobs_made = snap.jobs_made;
            }
            for n in &snap.jobs {
                slots.push(match c.postings.get(n) {
                    Some(Seen::Usable(k)) => Some(k.clone()),
                    Some(Seen::Unusable) => None,
                    None => {
                        missing.push(slots.len());
                        None
                    }
                });
            }
            let cached = slots.len() - missing.len();
            if c.postings.len() - cached > UNLISTED_SLACK.max(snap.jobs.len() / 8) {
                c.forget_unlisted(&snap.jobs);
            }
        });
        // What was read is kept apart from the cache, which a post may
        // trim meanwhile.
        if !missing.is_empty() {
            let names: Vec<String> = missing.iter().map(|i| snap.jobs[*i].clone()).collect();
            let read = self.fetch_postings(paths, &names, &snap.locked).await?;
            for (i, name) in missing.into_iter().zip(&names) {
                slots[i] = read.get(name).cloned();
            }
        }
        Ok(slots.into_iter().flatten().collect())
    }

    /// Reads and caches the postings `names`; returns the usable ones by
    /// znode name.
    async fn fetch_postings(
        &self,
        paths: &QueuePaths,
        names: &[String],
        locked: &HashSet<String>,
    ) -> Result<HashMap<String, Arc<Known>>> {
        let q = &paths.queue;
        let what = format!("cannot read the jobs of queue {q}");
        let read = self
            .read_many(&what, names.iter().map(|n| paths.job(n)).collect())
            .await?;
        let mut fresh = Vec::new();
        let mut extremes = Vec::new();
        for (name, result) in names.iter().zip(read) {
            let Some((data, stat)) = result else { continue };
            let seq = paths::sequence_of(name);
            let decoded = match seq {
                None => Err(posting::Undecodable {
                    reason: format!("znode name {name} has no sequence number"),
                    taskflow_rejects: true,
                }),
                Some(_) => posting::decode(&data),
            };
            match decoded {
                Ok(p) => {
                    let known = Known {
                        znode: name.clone(),
                        uuid: p.uuid,
                        name: p.name,
                        priority: p.priority,
                        seq: seq.unwrap_or(0),
                        version: stat.version,
                        ctime_ms: stat.ctime,
                        details: p.details,
                        book: p.book,
                    };
                    if matches!(p.priority, Priority::VERY_HIGH | Priority::VERY_LOW) {
                        extremes.push(fresh.len());
                    }
                    fresh.push(known);
                }
                Err(e) if e.taskflow_rejects && !locked.contains(name) => {
                    self.quarantine(paths, name, &data, stat.version, &e.reason)
                        .await?;
                }
                Err(e) => {
                    tracing::warn!(queue = %q, znode = %name, reason = %e.reason, "ignoring a job jobworker cannot read");
                    self.inner
                        .cache
                        .with(q, |c| c.postings.insert(name.clone(), Seen::Unusable));
                }
            }
        }
        // The exact priority of jobs posted by jobworker beyond ±2.
        if !extremes.is_empty() {
            let records = extremes.iter().map(|i| paths.record(&fresh[*i].uuid)).collect();
            let read = self.read_many(&what, records).await?;
            for (i, result) in extremes.iter().zip(read) {
                if let Some(rec) = result.and_then(|(data, _)| JobRecord::from_bytes(&data)) {
                    if rec.job.as_deref().is_none_or(|j| j == fresh[*i].znode) {
                        fresh[*i].priority = Priority(rec.priority);
                    }
                }
            }
        }
        let mut usable = HashMap::with_capacity(fresh.len());
        for known in fresh {
            let known = Arc::new(known);
            self.inner.cache.with(q, |c| c.insert(known.clone()));
            usable.insert(known.znode.clone(), known);
        }
        Ok(usable)
    }

    /// Reads many znodes in batched multi-reads (all batches in flight at
    /// once); `None` for missing ones.
    pub(crate) async fn read_many(
        &self,
        what: &str,
        paths: Vec<String>,
    ) -> Result<Vec<Option<(Vec<u8>, zk::Stat)>>> {
        let batches = paths.chunks(READ_BATCH).map(|chunk| {
            self.read(what, move |client| async move {
                let mut reader = client.new_multi_reader();
                for p in chunk {
                    reader.add_get_data(p)?;
                }
                reader.commit().await
            })
        });
        let mut out = Vec::with_capacity(paths.len());
        for results in futures_util::future::join_all(batches).await {
            let results = results?.map_err(|e| self.session().error(what, &e))?;
            for r in results {
                out.push(match r {
                    zk::MultiReadResult::Data { data, stat } => Some((data, stat)),
                    _ => None,
                });
            }
        }
        Ok(out)
    }

    /// Moves an undecodable job znode aside: its bytes to
    /// `.jw/quarantine/<name>` and the reason beside it, the znode deleted,
    /// in one transaction (nothing is lost).
    pub(crate) async fn quarantine(
        &self,
        paths: &QueuePaths,
        name: &str,
        data: &[u8],
        version: i32,
        reason: &str,
    ) -> Result<()> {
        tracing::warn!(queue = %paths.queue, znode = name, reason, "quarantining an undecodable job znode");
        let what = format!("cannot quarantine znode {name} of queue {}", paths.queue);
        let client = self.client(&what).await?;
        let persistent = &self.session().access().persistent();
        let _ = client.mkdir(&paths.quarantine, persistent).await;
        let mut w = client.new_multi_writer();
        w.add_create(&paths.quarantined(name), data, persistent)
            .and_then(|_| w.add_create(&paths.quarantine_reason(name), reason.as_bytes(), persistent))
            .and_then(|_| w.add_delete(&paths.job(name), Some(version)))
            .map_err(|e| self.session().error(&what, &e))?;
        match w.commit().await {
            Ok(_) => {}
            // Someone else moved or removed it first.
            Err(e) if crate::zookeeper::session::is_definite(crate::zookeeper::session::source(&e)) => {}
            Err(e) => tracing::warn!(queue = %paths.queue, znode = name, error = %e, "{what}"),
        }
        self.inner.cache.forget(&paths.queue, name);
        Ok(())
    }
}
