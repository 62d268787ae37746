//! Following a board's events across lost connections: a subscription
//! that ends with its connection (the server restarted, a failover, a cut
//! link), or cannot be opened, is tried again, pausing 0.25 s and then
//! twice as long after each try (at most 5 s; back to 0.25 s once an event
//! came), as `tail -F` follows a file. The events of a gap are missed:
//! pub/sub keeps none. `jobworker events` and the web app's live stream
//! follow this way.

use std::time::Duration;

use futures_util::{Stream, StreamExt};

use crate::board::{EventStream, Events};
use crate::error::Error;

/// The pause before the second try; each later one doubles it.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// The longest pause between two tries.
const MOST_PAUSE: Duration = Duration::from_secs(5);

/// What following a board's events yields.
#[derive(Debug)]
#[non_exhaustive]
pub enum Followed {
    /// Subscribed (first, or again after a gap).
    Open,
    /// An event (as [`Events::events`] gives it).
    Event(serde_json::Value),
    /// The subscription ended: events are missed until [`Followed::Open`].
    Closed,
    /// A try to subscribe failed; another follows after a pause.
    Failed(Error),
}

/// Follows `board`'s events (only tracked jobs' with `tracked_only`): the
/// stream subscribes first (yielding [`Followed::Open`] or
/// [`Followed::Failed`]) and never ends on its own.
pub fn follow<B>(board: B, tracked_only: bool) -> impl Stream<Item = Followed> + Send
where
    B: Events + Send + 'static,
{
    let state = Follow {
        board,
        tracked_only,
        stream: None,
        pause: Duration::ZERO,
    };
    futures_util::stream::unfold(state, |mut s| async move {
        let item = s.step().await;
        Some((item, s))
    })
}

struct Follow<B> {
    board: B,
    tracked_only: bool,
    stream: Option<EventStream>,
    /// The pause before the next try to subscribe.
    pause: Duration,
}

impl<B: Events> Follow<B> {
    async fn step(&mut self) -> Followed {
        if let Some(stream) = &mut self.stream {
            if let Some(event) = stream.next().await {
                self.pause = FIRST_PAUSE;
                return Followed::Event(event);
            }
            self.stream = None;
            return Followed::Closed;
        }
        tokio::time::sleep(self.pause).await;
        // A subscription that opens and drops at once is not tried again
        // at once either.
        self.pause = (self.pause * 2).clamp(FIRST_PAUSE, MOST_PAUSE);
        match self.board.events(self.tracked_only).await {
            Ok(stream) => {
                self.stream = Some(stream);
                Followed::Open
            }
            Err(e) => Followed::Failed(e),
        }
    }
}
