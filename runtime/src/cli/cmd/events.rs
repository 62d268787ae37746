//! `jobworker events`: events as they happen (one JSON object per line),
//! followed across lost connections (`board::follow`); stderr says when a
//! gap begins and ends.

use clap::Args;
use futures_util::StreamExt;

use crate::board::{follow, AnyBoard, Followed};
use crate::cli::output;
use crate::error::Result;

/// `events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only tracked jobs' events.
    #[arg(long)]
    pub tracked: bool,
    /// Stop after this many events (at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
}

/// Runs `events`. The first subscription must succeed (a wrong URL is an
/// error at once); later ones are tried until they do.
pub(crate) async fn run(board: &AnyBoard, a: &EventsArgs) -> Result<()> {
    let mut events = std::pin::pin!(follow(board.clone(), a.tracked));
    let mut seen = 0;
    let mut opened = false;
    while let Some(item) = events.next().await {
        match item {
            Followed::Open if !opened => {
                opened = true;
                let which = if a.tracked { "tracked jobs'" } else { "all" };
                eprintln!("jobworker: listening for {which} events");
            }
            Followed::Open => eprintln!("jobworker: listening again"),
            Followed::Failed(e) if !opened => return Err(e),
            Followed::Failed(e) => eprintln!("jobworker: cannot subscribe to events ({e}); trying again"),
            Followed::Event(event) => {
                output::json(&event);
                seen += 1;
                if a.count.is_some_and(|n| seen >= n) {
                    break;
                }
            }
            Followed::Closed => {
                eprintln!(
                    "jobworker: the event subscription was closed; events until it is open again are missed"
                )
            }
        }
    }
    Ok(())
}
