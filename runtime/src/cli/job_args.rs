//! Argument groups many commands share: a queue, and a job named by id
//! with its queue (found from the id when not given).

use clap::Args;

use crate::board::{Admin, AnyBoard};
use crate::error::{Error, ErrorKind, Result};
use crate::job::JobId;

/// A queue.
#[derive(Debug, Args)]
pub struct QueueArg {
    /// The queue.
    #[arg(long, short, default_value = "default", env = "JOBWORKER_QUEUE")]
    pub queue: String,
}

/// A queue, or every queue when none is given.
#[derive(Debug, Args)]
pub struct EveryQueueArg {
    /// The queue (default: every queue).
    #[arg(long, short, env = "JOBWORKER_QUEUE")]
    pub queue: Option<String>,
}

impl EveryQueueArg {
    /// The queue given, else every queue of `board`.
    pub(crate) async fn queues(&self, board: &AnyBoard) -> Result<Vec<String>> {
        match &self.queue {
            Some(q) => Ok(vec![q.clone()]),
            None => board.queues().await,
        }
    }
}

/// A job in a queue.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// The job id.
    pub id: String,
    /// The job's queue.
    #[command(flatten)]
    pub queue: JobQueueArg,
}

/// The queue of jobs named by id: found from the id when not given.
#[derive(Debug, Args)]
pub struct JobQueueArg {
    /// The job's queue (default: the queue that holds the job; giving it
    /// saves a lookup).
    #[arg(long, short, env = "JOBWORKER_QUEUE")]
    pub queue: Option<String>,
}

impl JobQueueArg {
    /// The queue of job `id`: the one given, else the only queue of
    /// `board` that holds it.
    pub(crate) async fn of(&self, board: &AnyBoard, id: &str) -> Result<String> {
        if let Some(q) = &self.queue {
            return Ok(q.clone());
        }
        let mut found = board.queues_of(&JobId::from(id)).await?;
        match found.len() {
            0 => Err(Error::new(
                ErrorKind::NotFound,
                format!("job {id} is not in any queue of this board"),
            )),
            1 => Ok(found.remove(0)),
            _ => Err(Error::invalid(format!(
                "job {id} is in several queues ({}): give -q QUEUE",
                found.join(", ")
            ))),
        }
    }

    /// `ids` grouped by their queue (the one given, or each one's own).
    pub(crate) async fn group(&self, board: &AnyBoard, ids: &[String]) -> Result<Vec<(String, Vec<JobId>)>> {
        let mut groups: Vec<(String, Vec<JobId>)> = Vec::new();
        for id in ids {
            let queue = self.of(board, id).await?;
            match groups.iter_mut().find(|(g, _)| *g == queue) {
                Some((_, list)) => list.push(JobId::from(id.as_str())),
                None => groups.push((queue, vec![JobId::from(id.as_str())])),
            }
        }
        Ok(groups)
    }
}
