//! `jobworker events`: events as they happen (one JSON object per line).

use clap::Args;
use futures_util::StreamExt;

use crate::board::{AnyBoard, Events};
use crate::cli::output;
use crate::error::{Error, Result};

/// `events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only tracked jobs' events.
    #[arg(long)]
    pub tracked: bool,
    /// Stop after this many events.
    #[arg(long)]
    pub count: Option<usize>,
}

/// Runs `events`.
pub(crate) async fn run(board: &AnyBoard, a: &EventsArgs) -> Result<()> {
    let mut stream = Box::pin(board.events(a.tracked).await?);
    eprintln!(
        "jobworker: listening for {} events",
        if a.tracked { "tracked jobs'" } else { "all" }
    );
    let mut seen = 0;
    while let Some(event) = stream.next().await {
        output::json(&event);
        seen += 1;
        if a.count.is_some_and(|n| seen >= n) {
            return Ok(());
        }
    }
    Err(Error::unavailable("the event subscription was closed"))
}
