//! The verbs on a claimed job's lease: `extend`, `consume`, `abandon` and
//! `trash`.

use clap::Args;

use crate::board::{AnyBoard, Board};
use crate::cli::job_args::JobQueueArg;
use crate::cli::output::{self, outln};
use crate::cli::values::seconds;
use crate::error::Result;
use crate::job::{Abandon, JobId, Lease};

/// A lease: job, owner and fencing token.
#[derive(Debug, Args)]
pub struct LeaseArgs {
    /// The job id.
    pub id: String,
    /// The job's queue.
    #[command(flatten)]
    pub queue: JobQueueArg,
    /// The owner string of the claim.
    #[arg(long, env = "JOBWORKER_OWNER")]
    pub owner: String,
    /// The fencing token of the claim (printed by `claim`): the verb is
    /// refused if the job was claimed again since.
    #[arg(long, required_unless_present = "any_token")]
    pub token: Option<u64>,
    /// Skip the fencing check: any claim by `--owner` will do (for claims
    /// made by taskflow, which have no token).
    #[arg(long, conflicts_with = "token")]
    pub any_token: bool,
}

impl LeaseArgs {
    /// The lease, in the queue given or the one that holds the job.
    async fn lease(&self, board: &AnyBoard) -> Result<Lease> {
        let queue = self.queue.of(board, &self.id).await?;
        // Token 0 skips the fencing check (`--any-token`).
        let token = self.token.unwrap_or(0);
        Ok(Lease::new(
            &queue,
            JobId::from(self.id.as_str()),
            &self.owner,
            token,
        ))
    }
}

/// `extend`.
#[derive(Debug, Args)]
pub struct ExtendArgs {
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// New lease length in seconds from now.
    #[arg(long, default_value_t = 60.0)]
    pub expiry: f64,
}

/// `abandon`.
#[derive(Debug, Args)]
pub struct AbandonArgs {
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// Count a failed attempt and retry after this many seconds.
    #[arg(long)]
    pub retry_after: Option<f64>,
    /// The failure to record with --retry-after.
    #[arg(long, default_value = "abandoned from the command line")]
    pub error: String,
}

/// `trash`.
#[derive(Debug, Args)]
pub struct TrashArgs {
    /// The lease.
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// Why the job is given up.
    #[arg(long, default_value = "trashed from the command line")]
    pub reason: String,
}

/// Runs `extend`.
pub(crate) async fn extend(board: &AnyBoard, a: &ExtendArgs, json: bool) -> Result<()> {
    board
        .extend(&a.lease.lease(board).await?, seconds(a.expiry, "--expiry")?)
        .await?;
    output::done(json, "extended", &a.lease.id);
    Ok(())
}

/// Runs `consume`.
pub(crate) async fn consume(board: &AnyBoard, a: &LeaseArgs, json: bool) -> Result<()> {
    board.consume(a.lease(board).await?).await?;
    output::done(json, "consumed", &a.id);
    Ok(())
}

/// Runs `abandon`.
pub(crate) async fn abandon(board: &AnyBoard, a: &AbandonArgs, json: bool) -> Result<()> {
    let how = match a.retry_after {
        Some(s) => Abandon::Retry {
            delay: seconds(s, "--retry-after")?,
            error: a.error.clone(),
        },
        None => Abandon::Release,
    };
    let state = board.abandon(a.lease.lease(board).await?, how).await?;
    if json {
        output::json(
            &serde_json::json!({ "id": a.lease.id, "result": "abandoned", "state": state.as_str() }),
        );
    } else {
        outln!("abandoned {} (now {state})", a.lease.id);
    }
    Ok(())
}

/// Runs `trash`.
pub(crate) async fn trash(board: &AnyBoard, a: &TrashArgs, json: bool) -> Result<()> {
    board.trash(a.lease.lease(board).await?, &a.reason).await?;
    output::done(json, "trashed", &a.lease.id);
    Ok(())
}
