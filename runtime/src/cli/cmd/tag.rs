//! `jobworker tag add|remove|find|top`: a job's tags, and the jobs by tag.

use std::collections::HashMap;

use clap::{Args, Subcommand};

use crate::board::{Admin, AnyBoard};
use crate::cli::job_args::{EveryQueueArg, JobQueueArg};
use crate::cli::output::{self, outln};
use crate::error::Result;
use crate::job::{JobId, Page};

/// `tag`.
#[derive(Debug, Subcommand)]
pub enum TagCommand {
    /// Add tags to a job.
    Add(TagChange),
    /// Remove tags from a job.
    Remove(TagChange),
    /// Jobs carrying a tag, most recently tagged first (queue by queue).
    Find {
        /// The tag.
        tag: String,
        /// The queue (default: every queue).
        #[command(flatten)]
        queue: EveryQueueArg,
        /// Entries to show.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// The most used tags (of every queue: their counts summed).
    Top {
        /// The queue (default: every queue).
        #[command(flatten)]
        queue: EveryQueueArg,
        /// Entries to show.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
}

/// Tags to add to or remove from a job.
#[derive(Debug, Args)]
pub struct TagChange {
    /// The job id.
    pub id: String,
    /// Tags.
    #[arg(required = true)]
    pub tags: Vec<String>,
    /// The job's queue.
    #[command(flatten)]
    pub queue: JobQueueArg,
}

/// Runs `tag`.
pub(crate) async fn run(board: &AnyBoard, t: &TagCommand, json: bool) -> Result<()> {
    match t {
        TagCommand::Add(c) => change(board, c, true, json).await,
        TagCommand::Remove(c) => change(board, c, false, json).await,
        TagCommand::Find { tag, queue, limit } => {
            let mut found = Vec::new();
            for q in queue.queues(board).await? {
                if found.len() >= *limit {
                    break;
                }
                let page = Page {
                    offset: 0,
                    limit: *limit - found.len(),
                };
                found.extend(board.tagged(&q, tag, page).await?);
            }
            if json {
                output::json(&output::to_json(
                    &found.iter().map(JobId::as_str).collect::<Vec<_>>(),
                )?);
            } else {
                found.iter().for_each(|id| outln!("{id}"));
            }
            Ok(())
        }
        TagCommand::Top { queue, limit } => {
            let top = top_tags(board, &queue.queues(board).await?, *limit).await?;
            if json {
                output::json(&output::to_json(&top)?);
            } else {
                top.iter().for_each(|(tag, n)| outln!("{n:>8}  {tag}"));
            }
            Ok(())
        }
    }
}

/// Tags a queue's jobs carry the most of, or over several queues their
/// counts summed (each queue's every tag read, so that the sum is right).
async fn top_tags(board: &AnyBoard, queues: &[String], limit: usize) -> Result<Vec<(String, u64)>> {
    if let [queue] = queues {
        return board.top_tags(queue, Page { offset: 0, limit }).await;
    }
    let mut counts: HashMap<String, u64> = HashMap::new();
    for queue in queues {
        let every = Page {
            offset: 0,
            limit: i64::MAX as usize,
        };
        for (tag, n) in board.top_tags(queue, every).await? {
            *counts.entry(tag).or_default() += n;
        }
    }
    let mut top: Vec<(String, u64)> = counts.into_iter().collect();
    // Highest count first, ties by name from the end, as both boards order one queue's.
    top.sort_by(|a, b| (b.1, &b.0).cmp(&(a.1, &a.0)));
    top.truncate(limit);
    Ok(top)
}

/// `tag add` (`add`) or `tag remove`: prints the job's tags afterwards.
async fn change(board: &AnyBoard, c: &TagChange, add: bool, json: bool) -> Result<()> {
    let tags: Vec<&str> = c.tags.iter().map(String::as_str).collect();
    let id = JobId::from(c.id.as_str());
    let queue = c.queue.of(board, &c.id).await?;
    let now = if add {
        board.tag(&queue, &id, &tags).await?
    } else {
        board.untag(&queue, &id, &tags).await?
    };
    if json {
        output::json(&serde_json::json!({ "id": c.id, "tags": now }));
    } else {
        outln!("{} tags: {}", c.id, now.join(" "));
    }
    Ok(())
}
