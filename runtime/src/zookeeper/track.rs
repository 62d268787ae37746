//! Tracking on ZooKeeper: a tracked job has an empty entry
//! `R/Q/.jw/tracked/<uuid>` (made at post with `NewJob::track`, or by
//! `track`), indexed like tags (`tags.rs`): listed only while the job's
//! record exists. ZooKeeper has no event stream, so tracking marks jobs
//! for operators (`jobworker tracked`) and nothing more.

use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::job::JobId;
use crate::zookeeper::ZooKeeperBoard;

impl ZooKeeperBoard {
    /// Tracks (`on`) or untracks job `job`; `is_not_found` when the queue
    /// has no such job.
    pub(crate) async fn set_tracked(&self, queue: &str, job: &JobId, on: bool) -> Result<()> {
        let paths = self.paths(queue)?;
        let uuid = job.as_str();
        if self.read_record(&paths, uuid).await?.is_none() {
            return Err(Error::not_found(queue, uuid));
        }
        let what = format!("cannot track job {uuid} in queue {queue}");
        let entry = paths.tracked_entry(uuid);
        if on {
            self.ensure_parents(&what, std::slice::from_ref(&entry)).await?;
        }
        let persistent = &self.session().access().persistent();
        let done = self
            .read(&what, |client| {
                let entry = entry.clone();
                async move {
                    match on {
                        true => client.create(&entry, b"", persistent).await.map(drop),
                        false => client.delete(&entry, None).await,
                    }
                }
            })
            .await?;
        match done {
            Ok(()) => {
                let event = if on { "track" } else { "untrack" };
                let at = self.now_ms();
                self.emit(queue, uuid, &[serde_json::json!({ "event": event, "at": at })]);
                Ok(())
            }
            // Tracked already, or not tracked.
            Err(zk::Error::NodeExists | zk::Error::NoNode) => Ok(()),
            Err(e) => Err(self.session().error(&what, &e)),
        }
    }

    /// The tracked jobs of `queue`, in the order they were tracked.
    pub(crate) async fn tracked_jobs(&self, queue: &str) -> Result<Vec<JobId>> {
        let paths = self.paths(queue)?;
        let mut jobs = self.confirmed(&paths, &paths.tracked, |_| true).await?;
        jobs.sort_by_key(|j| j.czxid);
        Ok(jobs.into_iter().map(|j| JobId(j.uuid)).collect())
    }
}
