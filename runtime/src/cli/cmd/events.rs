//! `jobworker events`: events as they happen (one JSON object per line).
//! A subscription that ends with its connection (the server restarted, a
//! failover, a network cut) is opened again, as `tail -F` follows a file:
//! the events of the gap are missed (pub/sub keeps none), and stderr says
//! so.

use std::time::Duration;

use clap::Args;
use futures_util::StreamExt;

use crate::board::{AnyBoard, EventStream, Events};
use crate::cli::output;
use crate::error::Result;

/// The first pause before subscribing again; it doubles after each
/// failed try, up to [`MOST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const MOST_PAUSE: Duration = Duration::from_secs(5);

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

/// Runs `events`. The first subscription must succeed (a wrong URL is an
/// error at once); later ones are tried until they do.
pub(crate) async fn run(board: &AnyBoard, a: &EventsArgs) -> Result<()> {
    let mut stream = board.events(a.tracked).await?;
    eprintln!(
        "jobworker: listening for {} events",
        if a.tracked { "tracked jobs'" } else { "all" }
    );
    let mut seen = 0;
    loop {
        while let Some(event) = stream.next().await {
            output::json(&event);
            seen += 1;
            if a.count.is_some_and(|n| seen >= n) {
                return Ok(());
            }
        }
        eprintln!("jobworker: the event subscription was closed; events until it is open again are missed");
        stream = subscribe_again(board, a.tracked).await;
        eprintln!("jobworker: listening again");
    }
}

/// Subscribes until it works, pausing longer after each failure.
async fn subscribe_again(board: &AnyBoard, tracked: bool) -> EventStream {
    let mut pause = FIRST_PAUSE;
    loop {
        tokio::time::sleep(pause).await;
        match board.events(tracked).await {
            Ok(stream) => return stream,
            Err(e) => eprintln!("jobworker: cannot subscribe to events ({e}); trying again"),
        }
        pause = (pause * 2).min(MOST_PAUSE);
    }
}
