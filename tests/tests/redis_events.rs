//! What the Redis board tells about jobs, against a real server: the
//! event channels (every event, tracked jobs only) and the queue's
//! statistics (a job's history is in the feature suite both backends run).

use std::collections::BTreeSet;
use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use jobworker::redis::RedisBoard;
use jobworker::{Board, JobId, NewJob};
use jobworker_tests::features::*;
use jobworker_tests::unique_queue;
use serde_json::Value;
use tokio::time::Instant;

type Events = Pin<Box<dyn Stream<Item = Value> + Send>>;

async fn subscribe(b: &RedisBoard, tracked_only: bool) -> Events {
    Box::pin(b.events(tracked_only).await.unwrap())
}

/// Reads events of queue `q` until `done` says so; panics after `timeout`.
async fn events_until(
    events: &mut Events,
    q: &str,
    timeout: Duration,
    done: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let mut got = Vec::new();
    let deadline = Instant::now() + timeout;
    while !done(&got) {
        match tokio::time::timeout_at(deadline, events.next()).await {
            Ok(Some(e)) if e["queue"] == q => got.push(e),
            Ok(Some(_)) => {}
            Ok(None) => panic!("event stream ended; got {got:?}"),
            Err(_) => panic!("timed out after {timeout:?} waiting for events; got {got:?}"),
        }
    }
    got
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

/// Makes `q` a queue the board knows (one job posted and done) before a
/// stream starts: on a cluster a stream subscribes queue by queue, to the
/// queues known when it starts and to new ones within seconds.
async fn known(b: &RedisBoard, q: &str) {
    b.post(q, NewJob::new("first")).await.unwrap();
    claim_and_consume(b, q).await;
}

fn kinds_of<'a>(events: &'a [Value], job: &JobId) -> Vec<&'a str> {
    events
        .iter()
        .filter(|e| e["job"] == job.as_str())
        .map(|e| e["event"].as_str().unwrap_or("?"))
        .collect()
}

/// Checks that `events` carry times (`at`) that never go back.
fn assert_in_time_order(events: &[Value]) {
    let times: Vec<i64> = events.iter().map(|e| e["at"].as_i64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

#[tokio::test]
async fn the_log_channel_carries_every_event() {
    let b = private_prefix_board(&unique_queue("ev")).await;
    let q = unique_queue("events");
    known(&b, &q).await;
    let mut log = subscribe(&b, false).await;
    let id = b.post(&q, NewJob::new("e")).await.unwrap();
    let c = b.claim(&[&q], "w-events", LONG, 1).await.unwrap().remove(0);
    b.consume(c.lease).await.unwrap();
    let got = events_until(&mut log, &q, SOON, |got| got.len() >= 3).await;
    assert_eq!(kinds_of(&got, &id), ["posted", "claimed", "consumed"], "{got:?}");
    assert_eq!(got[0]["name"], "e");
    assert_eq!(got[1]["worker"], "w-events");
    assert_eq!(got[1]["token"], 1);
    assert_in_time_order(&got);
}

#[tokio::test]
async fn the_tracked_stream_carries_only_tracked_jobs() {
    let b = private_prefix_board(&unique_queue("evt")).await;
    let q = unique_queue("tracked");
    known(&b, &q).await;
    let mut tracked = subscribe(&b, true).await;
    let mut log = subscribe(&b, false).await;
    let a = b.post(&q, NewJob::new("a").track()).await.unwrap();
    let quiet = b.post(&q, NewJob::new("quiet")).await.unwrap();
    let c = b.post(&q, NewJob::new("c")).await.unwrap();
    b.track(&q, &c).await.unwrap();
    let listed: BTreeSet<JobId> = b.tracked(&q).await.unwrap().into_iter().collect();
    assert_eq!(listed, set([&a, &c]));
    for job in claim(&b, &q, 3).await {
        b.consume(job.lease).await.unwrap();
    }
    let mut got = events_until(&mut tracked, &q, SOON, |got| {
        got.iter().filter(|e| e["event"] == "consumed").count() >= 2
    })
    .await;
    got.extend(events_within(&mut tracked, &q, Duration::from_millis(300)).await);
    assert_eq!(kinds_of(&got, &a), ["posted", "claimed", "consumed"], "{got:?}");
    assert_eq!(kinds_of(&got, &c), ["track", "claimed", "consumed"], "{got:?}");
    assert!(
        kinds_of(&got, &quiet).is_empty(),
        "untracked job on the tracked stream: {got:?}"
    );
    // The log channel has all three.
    let all = events_until(&mut log, &q, SOON, |got| {
        got.iter().filter(|e| e["event"] == "consumed").count() >= 3
    })
    .await;
    assert_eq!(kinds_of(&all, &quiet), ["posted", "claimed", "consumed"]);

    b.untrack(&q, &c).await.unwrap();
    assert_eq!(b.tracked(&q).await.unwrap(), [a]);
    assert!(b
        .track(&q, &"no-such-job".into())
        .await
        .unwrap_err()
        .is_not_found());
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

#[tokio::test]
async fn stats_count_wait_and_run_times_failures_and_retries() {
    let (b, q) = board_and_queue("stats").await;
    for _ in 0..3 {
        b.post(&q, NewJob::new("timed")).await.unwrap();
    }
    // The stats measure time: the jobs wait 300 ms and more, then each
    // runs 150 ms and more, on the server's clock.
    let posted = server_ms(&b).await;
    server_clock_passes(&b, posted + 300).await;
    for _ in 0..3 {
        let c = claim_one(&b, &q).await;
        let claimed = server_ms(&b).await;
        server_clock_passes(&b, claimed + 150).await;
        b.consume(c.lease).await.unwrap();
    }
    let s = b.stats(&q, None).await.unwrap();
    assert_eq!(s.queue, q);
    let today = server_ms(&b).await.div_euclid(DAY_MS);
    assert_eq!(s.day, jobworker::stats::day_name(today));
    assert_eq!(s.wait.count, 3);
    // Waits are about 300, 450 and 600 ms.
    assert!(
        (400.0..5_000.0).contains(&s.wait.mean_ms),
        "wait mean {}",
        s.wait.mean_ms
    );
    assert!(s.wait.std_dev_ms > 50.0, "wait std dev {}", s.wait.std_dev_ms);
    assert_eq!(s.run.count, 3);
    assert!(
        (145.0..5_000.0).contains(&s.run.mean_ms),
        "run mean {}",
        s.run.mean_ms
    );
    assert_eq!(s.wait.histogram.iter().map(|(_, n)| n).sum::<u64>(), 3);
    assert_eq!(s.run.histogram, [("s0".to_owned(), 3)]);
    assert_eq!((s.failed, s.retried), (0, 0));

    b.post(&q, NewJob::new("failing").max_attempts(2)).await.unwrap();
    for _ in 0..2 {
        let c = claim_one(&b, &q).await;
        b.abandon(c.lease, retry_now("nope")).await.unwrap();
    }
    let s = b.stats(&q, None).await.unwrap();
    assert_eq!((s.failed, s.retried), (1, 1), "{s:?}");
    assert_eq!(s.wait.count, 5, "both claims of the failing job waited");
    assert_eq!(s.run.count, 3, "failed runs are not counted as runs");
    let yesterday = b.stats(&q, Some(today - 1)).await.unwrap();
    assert_eq!(
        (yesterday.wait.count, yesterday.run.count, yesterday.failed),
        (0, 0, 0)
    );
}
