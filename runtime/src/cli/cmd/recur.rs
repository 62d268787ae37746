//! `jobworker recur add|list|remove`: recurring jobs.

use clap::{Args, Subcommand};

use crate::board::{Admin, AnyBoard};
use crate::cli::job_args::{EveryQueueArg, QueueArg};
use crate::cli::output::{self, outln};
use crate::cli::values::{json_to_msgpack, parse_span};
use crate::error::{Error, ErrorKind, Result};
use crate::job::Priority;
use crate::recurring::RecurringJob;
use crate::schedule::Rule;

/// `recur`.
#[derive(Debug, Subcommand)]
pub enum RecurCommand {
    /// Create (or, with an existing --id, update) a recurring job.
    Add(RecurAddArgs),
    /// List the recurring jobs of a queue (default: of every queue).
    List(EveryQueueArg),
    /// Delete a recurring job.
    Remove {
        /// Template id.
        id: String,
        /// The queue (default: the one that holds the template).
        #[command(flatten)]
        queue: EveryQueueArg,
    },
}

/// `recur add`.
#[derive(Debug, Args)]
pub struct RecurAddArgs {
    /// Job name of the runs.
    pub name: String,
    /// The queue.
    #[command(flatten)]
    pub queue: QueueArg,
    /// Interval: a number with unit ms, s, m, h or d (e.g. 30s).
    #[arg(long, required_unless_present = "cron", conflicts_with = "cron")]
    pub every: Option<String>,
    /// Delay of the first run of an interval (e.g. 5s).
    #[arg(long, requires = "every")]
    pub offset: Option<String>,
    /// Cron expression (5 fields, or 6 with seconds first).
    #[arg(long)]
    pub cron: Option<String>,
    /// Time zone of the cron expression (IANA name).
    #[arg(long, default_value = "UTC", requires = "cron")]
    pub tz: String,
    /// Most missed runs posted when catching up.
    #[arg(long, default_value_t = crate::recurring::DEFAULT_BACKLOG)]
    pub backlog: u32,
    /// Arguments as JSON.
    #[arg(long, default_value = "null")]
    pub args: String,
    /// Priority of the runs.
    #[arg(long, default_value = "NORMAL", allow_hyphen_values = true)]
    pub priority: String,
    /// Tries of each run.
    #[arg(long, default_value_t = crate::job::DEFAULT_MAX_ATTEMPTS)]
    pub max_attempts: u32,
    /// Tags of the runs (repeatable).
    #[arg(long)]
    pub tag: Vec<String>,
    /// Template id (updates the template with this id if there is one).
    #[arg(long)]
    pub id: Option<String>,
}

/// Runs `recur`.
pub(crate) async fn run(board: &AnyBoard, r: &RecurCommand, json: bool) -> Result<()> {
    match r {
        RecurCommand::Add(a) => {
            let id = board.recur(&a.queue.queue, recurring_job(a)?).await?;
            output::say(json, "recurring", &id);
        }
        RecurCommand::List(q) => {
            let mut list = Vec::new();
            for queue in q.queues(board).await? {
                list.extend(
                    board
                        .recurring(&queue)
                        .await?
                        .into_iter()
                        .map(|t| (queue.clone(), t)),
                );
            }
            if json {
                let mut rows = Vec::with_capacity(list.len());
                for (queue, t) in &list {
                    let mut row = output::to_json(t)?;
                    row["queue"] = queue.as_str().into();
                    rows.push(row);
                }
                output::json(&serde_json::Value::Array(rows));
            } else if list.is_empty() {
                match &q.queue {
                    Some(queue) => outln!("no recurring jobs in queue {queue}"),
                    None => outln!("no recurring jobs"),
                }
            } else {
                let rows = list.iter().map(|(queue, t)| {
                    [
                        t.id.clone(),
                        queue.clone(),
                        t.name.clone(),
                        t.rule.clone(),
                        output::time(t.next_ms),
                        t.runs.to_string(),
                    ]
                });
                output::table(&["ID", "QUEUE", "NAME", "RULE", "NEXT", "RUNS"], rows);
            }
        }
        RecurCommand::Remove { id, queue } => {
            remove(board, id, queue).await?;
            output::say(json, "removed", id);
        }
    }
    Ok(())
}

/// Removes recurring job `id` from the queue given, else from the queue
/// that holds it.
async fn remove(board: &AnyBoard, id: &str, queue: &EveryQueueArg) -> Result<()> {
    if let Some(q) = &queue.queue {
        return board.unrecur(q, id).await;
    }
    let mut holders = Vec::new();
    for q in queue.queues(board).await? {
        if board.recurring(&q).await?.iter().any(|t| t.id == id) {
            holders.push(q);
        }
    }
    match holders.as_slice() {
        [] => Err(Error::new(
            ErrorKind::NotFound,
            format!("recurring job {id} is not in any queue of this board"),
        )),
        [q] => board.unrecur(q, id).await,
        _ => Err(Error::invalid(format!(
            "recurring job {id} is in several queues ({}): give -q QUEUE",
            holders.join(", ")
        ))),
    }
}

/// The template `recur add` stores.
fn recurring_job(a: &RecurAddArgs) -> Result<RecurringJob> {
    let rule = match (&a.every, &a.cron) {
        (Some(every), None) => Rule::every(parse_span(every)?)?,
        (None, Some(cron)) => Rule::cron(cron, &a.tz)?,
        _ => return Err(Error::invalid("give exactly one of --every and --cron")),
    };
    let args: serde_json::Value =
        serde_json::from_str(&a.args).map_err(|e| Error::invalid(format!("--args is not JSON: {e}")))?;
    let mut job = RecurringJob::new(&a.name, rule)
        .priority(Priority::parse(&a.priority)?)
        .max_attempts(a.max_attempts)
        .backlog(a.backlog);
    job.args = json_to_msgpack(&args);
    if let Some(offset) = &a.offset {
        job = job.offset(parse_span(offset)?);
    }
    for t in &a.tag {
        job = job.tag(t);
    }
    if let Some(id) = &a.id {
        job = job.id(id);
    }
    Ok(job)
}
