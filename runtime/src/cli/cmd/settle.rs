//! `jobworker retry` and `purge`: trashed jobs put back to work or deleted
//! for good, by id, by failure group, or all.

use clap::Args;

use crate::board::{Admin, AnyBoard};
use crate::cli::job_args::JobQueueArg;
use crate::cli::output;
use crate::error::{Error, ErrorKind, Result};

/// `retry` and `purge`: trashed jobs by id, by failure group, or all.
#[derive(Debug, Args)]
pub struct SettleArgs {
    /// Job ids.
    pub ids: Vec<String>,
    /// The job's queue.
    #[command(flatten)]
    pub queue: JobQueueArg,
    /// Every job of this failure group: of the queue given with -q, else
    /// of every queue.
    #[arg(long, conflicts_with = "ids")]
    pub group: Option<String>,
    /// Every trashed job (all groups): of the queue given with -q, else of
    /// every queue.
    #[arg(long, conflicts_with_all = ["ids", "group"])]
    pub all: bool,
}

/// Runs `retry`, or `purge` when `purge`.
pub(crate) async fn run(board: &AnyBoard, a: &SettleArgs, purge: bool, json: bool) -> Result<()> {
    let verb = if purge { "purged" } else { "retried" };
    if a.all || a.group.is_some() {
        // Without -q: every queue jobworker posted to.
        let queues = match &a.queue.queue {
            Some(q) => vec![q.clone()],
            None => board.queues().await?,
        };
        for queue in &queues {
            let n = board.settle_failed(queue, a.group.as_deref(), purge).await?;
            output::say(json, &format!("{verb} {n} jobs of"), queue);
        }
        return Ok(());
    }
    if a.ids.is_empty() {
        return Err(Error::invalid("name job ids, or use --group GROUP or --all"));
    }
    let mut missing = Vec::new();
    for (queue, jobs) in a.queue.group(board, &a.ids).await? {
        let results = if purge {
            board.purge(&queue, &jobs).await?
        } else {
            board.retry(&queue, &jobs).await?
        };
        for (id, r) in jobs.iter().zip(results) {
            match r {
                Ok(()) => output::say(json, verb, id.as_str()),
                Err(_) => missing.push(format!("{queue}/{id}")),
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::NotFound,
        format!("not in the trash: {}", missing.join(", ")),
    ))
}
