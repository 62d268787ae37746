//! Tracking jobs (their events also published board-wide): the verbs
//! `track` and `untrack` over `track.lua`, and the tracked jobs.

use crate::error::Result;
use crate::job::JobId;
use crate::redis::board::RedisBoard;
use crate::redis::scripts::{self, SCRIPTS};

impl RedisBoard {
    /// Tracks a job: its events are also published on
    /// `<prefix>:ev:<event>`.
    pub async fn track(&self, queue: &str, job: &JobId) -> Result<()> {
        self.set_tracking(queue, job, "track").await
    }

    /// Stops tracking a job.
    pub async fn untrack(&self, queue: &str, job: &JobId) -> Result<()> {
        self.set_tracking(queue, job, "untrack").await
    }

    async fn set_tracking(&self, queue: &str, job: &JobId, mode: &str) -> Result<()> {
        let keys = self.keys(queue)?;
        let reply = scripts::call(&self.conn, &SCRIPTS.track, &keys, &[mode, job.as_str()]).await?;
        reply.accept(&keys, job.as_str(), "").map(drop)
    }

    /// Tracked jobs of `queue`.
    pub async fn tracked(&self, queue: &str) -> Result<Vec<JobId>> {
        let keys = self.keys(queue)?;
        let ids: Vec<String> = self
            .conn
            .query(redis::cmd("ZRANGE").arg(keys.tracked()).arg(0).arg(-1))
            .await?;
        Ok(ids.into_iter().map(JobId).collect())
    }
}
