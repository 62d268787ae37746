//! Changing a job's priority: the verb `set_priority` over `priority.lua`.

use crate::error::{Error, Result};
use crate::job::{JobId, JobState, Priority};
use crate::redis::board::RedisBoard;
use crate::redis::scripts::{self, SCRIPTS};

impl RedisBoard {
    /// Changes the priority of a job that has not finished; a ready job
    /// moves to its new place at once. Returns the job's state.
    pub async fn set_priority(&self, queue: &str, job: &JobId, priority: Priority) -> Result<JobState> {
        let keys = self.keys(queue)?;
        let priority = priority.validated()?;
        let reply = scripts::call(
            &self.conn,
            &SCRIPTS.priority,
            &keys,
            &[job.as_str(), &priority.0.to_string()],
        )
        .await?;
        match reply.status().as_str() {
            "ok" => JobState::parse(&reply.string(1)?),
            "finished" => Err(Error::finished(queue, job.as_str(), &reply.string(1)?)),
            _ => Err(Error::not_found(queue, job.as_str())),
        }
    }
}
