//! Cancel and dependencies: a job that others wait for is refused unless
//! they are cancelled with it (then every job that waits for it, directly
//! or not, in any queue, dependents first); a cancelled waiting job leaves
//! its dependencies' entries.

use std::collections::BTreeSet;

use super::target::Guard;
use crate::error::{Error, Result};
use crate::job::JobId;
use crate::zookeeper::lease::TRIES;
use crate::zookeeper::paths::QueuePaths;
use crate::zookeeper::record::{DepRef, JobRecord};
use crate::zookeeper::ZooKeeperBoard;

/// The marker of the refusal of a job with live dependents.
const HAS_DEPENDENTS: &str = "has live dependents";

impl ZooKeeperBoard {
    /// cancel, with or without the jobs that wait for those named (see the
    /// module docs). Without them, one transaction for the jobs named.
    pub(crate) async fn cancel_with(
        &self,
        queue: &str,
        ids: &[JobId],
        with_dependents: bool,
    ) -> Result<Vec<(String, JobId)>> {
        if !with_dependents {
            return self.cancel_jobs(queue, ids).await;
        }
        let roots: Vec<DepRef> = ids
            .iter()
            .map(|id| DepRef {
                queue: queue.to_owned(),
                id: id.0.clone(),
            })
            .collect();
        let mut cancelled: Vec<(String, JobId)> = Vec::new();
        // A dependent posted while the cascade runs refuses its dependency's
        // cancel: read the closure again.
        for _ in 0..TRIES {
            let order = self.dependents_closure(&roots).await?;
            match self.cancel_in_order(&order, &roots, &mut cancelled).await {
                Err(e) if e.is_invalid() && e.message().contains(HAS_DEPENDENTS) => continue,
                other => return other.map(|()| cancelled),
            }
        }
        Err(Error::unavailable(format!(
            "cannot cancel the jobs waiting for {} of queue {queue}: new ones keep coming",
            ids.iter().map(|i| i.as_str()).collect::<Vec<_>>().join(", ")
        )))
    }

    /// Cancels `order` from its end (dependents first), skipping those
    /// cancelled already; a job other than a root that finished meanwhile
    /// is passed over.
    async fn cancel_in_order(
        &self,
        order: &[DepRef],
        roots: &[DepRef],
        cancelled: &mut Vec<(String, JobId)>,
    ) -> Result<()> {
        for d in order.iter().rev() {
            let pair = (d.queue.clone(), JobId(d.id.clone()));
            if cancelled.contains(&pair) {
                continue;
            }
            match self.cancel_jobs(&d.queue, std::slice::from_ref(&pair.1)).await {
                Ok(_) => cancelled.push(pair),
                Err(e) if e.is_finished() && !roots.contains(d) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Every job reachable from `roots` through live dependents, roots
    /// first, each once.
    async fn dependents_closure(&self, roots: &[DepRef]) -> Result<Vec<DepRef>> {
        let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
        let mut order: Vec<DepRef> = Vec::new();
        for r in roots {
            if seen.insert((r.queue.clone(), r.id.clone())) {
                order.push(r.clone());
            }
        }
        let mut at = 0;
        while at < order.len() {
            let paths = self.paths(&order[at].queue)?;
            let id = order[at].id.clone();
            at += 1;
            for d in self.live_dependents(&paths, &id).await?.0 {
                if seen.insert((d.queue.clone(), d.id.clone())) {
                    order.push(d);
                }
            }
        }
        Ok(order)
    }

    /// Refuses the cancel of job `uuid` while jobs wait for it; else the
    /// check its transaction makes against a dependent posted meanwhile.
    pub(super) async fn no_live_dependents(
        &self,
        paths: &QueuePaths,
        uuid: &str,
        record: &JobRecord,
    ) -> Result<Guard> {
        if !record.dependents {
            return Ok(Guard::Unflagged);
        }
        let (live, version) = self.live_dependents(paths, uuid).await?;
        if !live.is_empty() {
            let names: Vec<String> = live.iter().map(|d| format!("{}/{}", d.queue, d.id)).collect();
            return Err(Error::invalid(format!(
                "job {uuid} in queue {} {HAS_DEPENDENTS} ({}); cancel them with it \
                 (--with-dependents) or first",
                paths.queue,
                names.join(", ")
            )));
        }
        Ok(version.map_or(Guard::Absent, Guard::Version))
    }

    /// Removes cancelled job `uuid` of `queue` from the dependents of the
    /// jobs it waited for (best effort: an entry left behind names a job
    /// that no longer waits, which counts for nothing).
    pub(super) async fn unlink_dependencies(&self, queue: &str, uuid: &str, record: &JobRecord) {
        let Some(client) = self.session().current() else {
            return;
        };
        for d in &record.depends {
            if let Ok(paths) = self.paths(&d.queue) {
                let _ = client
                    .delete(&paths.dependent_entry(&d.id, queue, uuid), None)
                    .await;
            }
        }
    }
}
