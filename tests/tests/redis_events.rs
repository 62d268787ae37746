//! The Redis board's event channels, against a real server: a queue that
//! is new after a stream started is heard (on a cluster the stream
//! subscribes queue by queue). The event streams, a job's history and the
//! queue's statistics are in the feature suite both backends run.

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use jobworker::redis::RedisBoard;
use jobworker::{Board, NewJob};
use jobworker_tests::features::*;
use jobworker_tests::unique_queue;
use serde_json::Value;
use tokio::time::Instant;

type Events = Pin<Box<dyn Stream<Item = Value> + Send>>;

async fn subscribe(b: &RedisBoard, tracked_only: bool) -> Events {
    Box::pin(b.events(tracked_only).await.unwrap())
}

/// Events of queue `q` arriving within `quiet`.
async fn events_within(events: &mut Events, q: &str, quiet: Duration) -> Vec<Value> {
    let mut got = Vec::new();
    let deadline = Instant::now() + quiet;
    while let Ok(Some(e)) = tokio::time::timeout_at(deadline, events.next()).await {
        if e["queue"] == q {
            got.push(e);
        }
    }
    got
}

/// A queue first posted to after the stream started is heard too (at
/// once on one server; on a cluster once the stream subscribed to it).
#[tokio::test]
async fn a_queue_new_after_the_stream_started_is_heard() {
    let b = private_prefix_board(&unique_queue("evn")).await;
    let mut log = subscribe(&b, false).await;
    let q = unique_queue("new");
    let deadline = Instant::now() + SOON;
    let heard = loop {
        b.post(&q, NewJob::new("n")).await.unwrap();
        let got = events_within(&mut log, &q, Duration::from_millis(200)).await;
        if let Some(e) = got.into_iter().find(|e| e["event"] == "posted") {
            break e;
        }
        assert!(
            Instant::now() < deadline,
            "no event of the new queue within {SOON:?}"
        );
    };
    assert_eq!(heard["name"], "n");
}
