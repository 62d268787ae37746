//! Cancel and dependencies: a job that others wait for is refused unless
//! they are cancelled with it (then every job that waits for it, directly
//! or not, in any queue, each after the jobs that wait for it); a
//! cancelled waiting job leaves its dependencies' entries.

use std::collections::{HashMap, HashSet};

use super::target::Guard;
use crate::error::{Error, Result};
use crate::job::{JobId, JobState};
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
        // A finished root refuses the cancel before any dependent goes.
        for id in ids {
            let state = self.show_job(queue, id.as_str()).await?.state;
            if matches!(
                state,
                JobState::Completed | JobState::Trashed | JobState::Cancelled
            ) {
                return Err(Error::finished(queue, id.as_str(), &state.to_string()));
            }
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
        // cancel: read the graph again.
        for _ in 0..TRIES {
            let order = self.dependents_first(&roots).await?;
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

    /// Cancels `order` (dependents first), skipping those cancelled
    /// already; a job other than a root that finished meanwhile is passed
    /// over.
    async fn cancel_in_order(
        &self,
        order: &[DepRef],
        roots: &[DepRef],
        cancelled: &mut Vec<(String, JobId)>,
    ) -> Result<()> {
        for d in order {
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

    /// `roots` and every job that waits for them, directly or not, in an
    /// order where each job comes after all the jobs that wait for it (a
    /// depth-first post-order of the dependents graph), each once.
    async fn dependents_first(&self, roots: &[DepRef]) -> Result<Vec<DepRef>> {
        let mut waiting_for: HashMap<DepRef, Vec<DepRef>> = HashMap::new();
        let mut next: Vec<DepRef> = roots.to_vec();
        while let Some(job) = next.pop() {
            if waiting_for.contains_key(&job) {
                continue;
            }
            let paths = self.paths(&job.queue)?;
            let dependents = self.live_dependents(&paths, &job.id).await?.0;
            next.extend(dependents.iter().cloned());
            waiting_for.insert(job, dependents);
        }
        let mut order = Vec::with_capacity(waiting_for.len());
        let mut placed: HashSet<DepRef> = HashSet::new();
        // (job, how many of its dependents are placed or being placed)
        let mut stack: Vec<(DepRef, usize)> = Vec::new();
        for root in roots {
            stack.push((root.clone(), 0));
            while let Some((job, i)) = stack.pop() {
                if placed.contains(&job) {
                    continue;
                }
                let dependents = waiting_for.get(&job).map(Vec::as_slice).unwrap_or_default();
                match dependents.get(i) {
                    Some(d) => {
                        stack.push((job.clone(), i + 1));
                        // A job already on the stack would be a cycle: none
                        // can be made (a job depends only on older ones).
                        if !placed.contains(d) && !stack.iter().any(|(s, _)| s == d) {
                            stack.push((d.clone(), 0));
                        }
                    }
                    None => {
                        placed.insert(job.clone());
                        order.push(job);
                    }
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
