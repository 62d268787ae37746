//! `jobworker failed`: failure groups (trashed jobs by queue and kind), or
//! one group's jobs.

use clap::Args;

use crate::board::{Admin, AnyBoard, Board};
use crate::cli::output::{self, outln};
use crate::error::Result;
use crate::job::Page;

/// `failed`.
#[derive(Debug, Args)]
pub struct FailedArgs {
    /// Show this group's jobs instead of the list of groups.
    pub group: Option<String>,
    /// Queues (comma-separated; default: every queue jobworker posted to).
    #[arg(long, short, value_delimiter = ',')]
    pub queue: Vec<String>,
    /// Entries to show per group.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

/// Runs `failed`.
pub(crate) async fn run(board: &AnyBoard, a: &FailedArgs, json: bool) -> Result<()> {
    let queues = if a.queue.is_empty() {
        board.queues().await?
    } else {
        a.queue.clone()
    };
    if let Some(group) = &a.group {
        return group_jobs(board, &queues, group, a.limit, json).await;
    }
    let mut groups = Vec::new();
    for queue in &queues {
        groups.extend(board.failed(queue).await?);
    }
    if json {
        output::json(&output::to_json(&groups)?);
    } else if groups.is_empty() {
        outln!("no failed jobs");
    } else {
        let rows = groups
            .iter()
            .map(|g| [g.queue.clone(), g.group.clone(), g.count.to_string()]);
        output::table(&["QUEUE", "GROUP", "JOBS"], rows);
    }
    Ok(())
}

/// `failed GROUP`: the group's jobs in each of `queues`.
async fn group_jobs(
    board: &AnyBoard,
    queues: &[String],
    group: &str,
    limit: usize,
    json: bool,
) -> Result<()> {
    let mut shown = 0;
    for queue in queues {
        let jobs = board.failed_jobs(queue, group, Page { offset: 0, limit }).await?;
        shown += jobs.len();
        for id in jobs {
            let info = board.show(queue, &id).await?;
            if json {
                output::json(&output::to_json(&info)?);
            } else {
                outln!(
                    "{queue}/{id}  {}  {}",
                    info.name,
                    info.reason.as_deref().unwrap_or("-")
                );
            }
        }
    }
    if shown == 0 && !json {
        outln!("no failed jobs in group {group} (`jobworker failed` lists the groups)");
    }
    Ok(())
}
