//! Posting until a followed event stream (`board::follow`) hears it: a
//! subscription may not be open yet, or may be open again after a gap that
//! lost the events of earlier posts.

use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use jobworker::board::{Board, Followed};
use jobworker::NewJob;

/// Posts to `q` on `board` until `events` yields one of those posts' own
/// `posted` event; returns what else it yielded, in order. Panics after
/// 60 s, naming what the stream gave.
pub async fn post_until_heard(
    board: &impl Board,
    q: &str,
    events: &mut (impl Stream<Item = Followed> + Unpin),
) -> Vec<Followed> {
    let mut posted = Vec::new();
    let mut other = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "no post heard; the stream gave {other:?}"
        );
        if let Ok(id) = board.post(q, NewJob::new("s")).await {
            posted.push(id.as_str().to_owned());
        }
        while let Ok(Some(item)) = tokio::time::timeout(Duration::from_millis(500), events.next()).await {
            match item {
                Followed::Event(e)
                    if e["event"] == "posted" && posted.iter().any(|p| e["job"] == p.as_str()) =>
                {
                    return other;
                }
                item => other.push(item),
            }
        }
    }
}
