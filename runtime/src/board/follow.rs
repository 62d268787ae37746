//! Following a board's events across lost connections: a subscription
//! that ends with its connection (the server restarted, a failover, a cut
//! link) is opened again, pausing 0.25 s and then twice as long after each
//! failed try (at most 5 s), as `tail -F` follows a file. The events of the
//! gap are missed: pub/sub keeps none. `jobworker events` and the web app's
//! live stream follow this way.

use std::time::Duration;

use futures_util::{Stream, StreamExt};

use crate::board::{EventStream, Events};
use crate::error::Error;

/// The first pause before subscribing again.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// The longest pause between two tries.
const MOST_PAUSE: Duration = Duration::from_secs(5);

/// What following a board's events yields.
#[derive(Debug)]
pub enum Followed {
    /// An event (as [`Events::events`] gives it).
    Event(serde_json::Value),
    /// The subscription ended: events are missed until [`Followed::Open`].
    Closed,
    /// A try to subscribe again failed; another follows after a pause.
    Failed(Error),
    /// Subscribed again.
    Open,
}

/// Follows `board`'s events (only tracked jobs' with `tracked_only`) from
/// `first`, a subscription already open; the stream never ends on its own.
pub fn follow<B>(board: B, tracked_only: bool, first: EventStream) -> impl Stream<Item = Followed> + Send
where
    B: Events + Send + 'static,
{
    let state = Follow {
        board,
        tracked_only,
        stream: Some(first),
        pause: FIRST_PAUSE,
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
    pause: Duration,
}

impl<B: Events> Follow<B> {
    async fn step(&mut self) -> Followed {
        if let Some(stream) = &mut self.stream {
            if let Some(event) = stream.next().await {
                return Followed::Event(event);
            }
            self.stream = None;
            self.pause = FIRST_PAUSE;
            return Followed::Closed;
        }
        tokio::time::sleep(self.pause).await;
        match self.board.events(self.tracked_only).await {
            Ok(stream) => {
                self.stream = Some(stream);
                Followed::Open
            }
            Err(e) => {
                self.pause = (self.pause * 2).min(MOST_PAUSE);
                Followed::Failed(e)
            }
        }
    }
}
