//! `jobworker claim`: takes jobs and prints their leases.

use clap::Args;

use crate::board::{AnyBoard, Board};
use crate::cli::output::{self, outln};
use crate::cli::values::{default_owner, seconds};
use crate::error::{Error, Result};
use crate::job::JobId;

/// `claim`.
#[derive(Debug, Args)]
pub struct ClaimArgs {
    /// Queues, in the order they are served (comma-separated).
    #[arg(long, short, default_value = "default", value_delimiter = ',')]
    pub queue: Vec<String>,
    /// Claim this one job instead of the next ones in order.
    #[arg(long)]
    pub id: Option<String>,
    /// Owner string written on the job.
    #[arg(long, env = "JOBWORKER_OWNER")]
    pub owner: Option<String>,
    /// Lease length in seconds.
    #[arg(long, default_value_t = 60.0)]
    pub expiry: f64,
    /// With `--id`: no expiry, as taskflow's claim without one (held until
    /// released; on ZooKeeper, as long as this command's session).
    #[arg(long, requires = "id", conflicts_with = "expiry")]
    pub no_expiry: bool,
    /// How many jobs to take.
    #[arg(long, default_value_t = 1)]
    pub count: usize,
}

/// Runs `claim`.
pub(crate) async fn run(board: &AnyBoard, a: &ClaimArgs, json: bool) -> Result<()> {
    let owner = a.owner.clone().unwrap_or_else(default_owner);
    let expiry = seconds(a.expiry, "--expiry")?;
    let claimed = match &a.id {
        Some(id) => {
            let [queue] = a.queue.as_slice() else {
                return Err(Error::invalid("--id needs exactly one --queue"));
            };
            let expiry = (!a.no_expiry).then_some(expiry);
            vec![
                board
                    .claim_job(queue, &JobId::from(id.as_str()), &owner, expiry)
                    .await?,
            ]
        }
        None => {
            let queues: Vec<&str> = a.queue.iter().map(String::as_str).collect();
            board.claim(&queues, &owner, expiry, a.count).await?
        }
    };
    if json {
        output::json(&serde_json::Value::Array(
            claimed.iter().map(output::claimed_json).collect(),
        ));
    } else if claimed.is_empty() {
        outln!("nothing to claim");
    } else {
        claimed.iter().for_each(output::claimed_text);
    }
    Ok(())
}
