//! The queues under the root (a child with a jobs path), and which queue
//! holds a job: for commands given a job id without its queue.
//! Every child of the root that is a queue is checked, in one batch of
//! reads, for the job's record (`.jw/ids/<uuid>`), which jobworker keeps for
//! every job it posted or indexed (taskflow's jobs get one at the first
//! claim or reap that sees them).

use crate::error::Result;
use crate::job::JobId;
use crate::zookeeper::ZooKeeperBoard;

impl ZooKeeperBoard {
    /// The queues under the root, sorted: the children that are queue
    /// names and have taskflow's jobs path (so a node another application
    /// keeps under the root is not one).
    pub async fn queue_names(&self) -> Result<Vec<String>> {
        let root = if self.root().is_empty() { "/" } else { self.root() };
        let what = format!("cannot list the queues under {root}");
        let paths: Vec<_> = self
            .children(&what, root)
            .await?
            .into_iter()
            .filter_map(|q| self.paths(&q).ok())
            .collect();
        let found = self
            .read_many(&what, paths.iter().map(|p| p.jobs.clone()).collect())
            .await?;
        let mut out: Vec<String> = paths
            .into_iter()
            .zip(found)
            .filter(|(_, hit)| hit.is_some())
            .map(|(p, _)| p.queue)
            .collect();
        out.sort();
        Ok(out)
    }

    /// The queues that hold job `id` (usually one), sorted.
    pub async fn queues_of(&self, id: &JobId) -> Result<Vec<String>> {
        let root = if self.root().is_empty() { "/" } else { self.root() };
        let what = format!("cannot look for job {id} in the queues under {root}");
        let children = self.children(&what, root).await?;
        let queues: Vec<(String, String)> = children
            .into_iter()
            .filter_map(|q| {
                let record = self.paths(&q).ok()?.record(id.as_str());
                Some((q, record))
            })
            .collect();
        let found = self
            .read_many(&what, queues.iter().map(|(_, r)| r.clone()).collect())
            .await?;
        let mut out: Vec<String> = queues
            .into_iter()
            .zip(found)
            .filter(|(_, hit)| hit.is_some())
            .map(|((q, _), _)| q)
            .collect();
        out.sort();
        Ok(out)
    }
}
