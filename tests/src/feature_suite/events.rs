//! The event stream: every event of every queue, or only tracked jobs'
//! events, from boards other than the listener's.

use std::time::Duration;

use futures_util::StreamExt;
use jobworker::board::{Admin, EventStream, Events};
use jobworker::{Abandon, Board, JobId, NewJob, Priority};
use serde_json::Value;
use tokio::time::Instant;

use super::{FeatureHarness, LONG, SOON};
use crate::unique_queue;

/// Reads events of queue `q` until `done` says so; panics after [`SOON`].
async fn events_until(events: &mut EventStream, q: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut got = Vec::new();
    let deadline = Instant::now() + SOON;
    while !done(&got) {
        match tokio::time::timeout_at(deadline, events.next()).await {
            Ok(Some(e)) if e["queue"] == q => got.push(e),
            Ok(Some(_)) => {}
            Ok(None) => panic!("the event stream ended; got {got:?}"),
            Err(_) => panic!("no more events within {SOON:?}; got {got:?}"),
        }
    }
    got
}

/// A stream that other boards are known to write to: a job is posted to
/// `q` (by `poster`) until its `posted` event arrives (a ZooKeeper board
/// learns of a new listener from a watch, a moment after it starts); then
/// every job of `q` is consumed, and the stream read past the probe's end.
async fn heard_stream<B: Events + Board>(
    listener: &B,
    poster: &B,
    q: &str,
    tracked_only: bool,
) -> EventStream {
    let mut events = listener.events(tracked_only).await.unwrap();
    let deadline = Instant::now() + SOON;
    // Every probe posted so far: on a busy machine an event may come after
    // the next probe was posted.
    let mut probes: Vec<JobId> = Vec::new();
    let probe = 'heard: loop {
        probes.push(poster.post(q, NewJob::new("probe").track()).await.unwrap());
        let quiet = Instant::now() + Duration::from_millis(300);
        while let Ok(Some(e)) = tokio::time::timeout_at(quiet, events.next()).await {
            if let Some(p) = probes
                .iter()
                .find(|p| e["job"] == p.as_str() && e["event"] == "posted")
            {
                break 'heard p.clone();
            }
        }
        assert!(Instant::now() < deadline, "no event heard within {SOON:?}");
    };
    loop {
        let claimed = poster.claim(&[q], "w-probe", LONG, 100).await.unwrap();
        if claimed.is_empty() {
            break;
        }
        for c in claimed {
            poster.consume(c.lease).await.unwrap();
        }
    }
    let ended = |e: &Value| e["job"] == probe.as_str() && e["event"] == "consumed";
    events_until(&mut events, q, |got| got.iter().any(ended)).await;
    events
}

fn kinds_of<'a>(events: &'a [Value], job: &JobId) -> Vec<&'a str> {
    events
        .iter()
        .filter(|e| e["job"] == job.as_str())
        .map(|e| e["event"].as_str().unwrap_or("?"))
        .collect()
}

/// A job's post, claim and consume each make an event, with its name, the
/// worker and the claim's token.
pub async fn the_event_stream_carries_every_event<H: FeatureHarness>(h: &H) {
    let (listener, b) = (h.board().await, h.board().await);
    let q = unique_queue("events");
    let mut log = heard_stream(&listener, &b, &q, false).await;
    let id = b.post(&q, NewJob::new("e")).await.unwrap();
    let c = b.claim(&[&q], "w-events", LONG, 1).await.unwrap().remove(0);
    let token = c.lease.token();
    b.consume(c.lease).await.unwrap();
    let got = events_until(&mut log, &q, |got| kinds_of(got, &id).len() >= 3).await;
    let got: Vec<Value> = got.into_iter().filter(|e| e["job"] == id.as_str()).collect();
    assert_eq!(kinds_of(&got, &id), ["posted", "claimed", "consumed"], "{got:?}");
    assert_eq!(got[0]["name"], "e");
    assert_eq!(
        (&got[1]["worker"], got[1]["token"].as_u64()),
        (&"w-events".into(), Some(token))
    );
    assert!(
        got.iter().all(|e| e["at"].as_i64().is_some_and(|at| at > 0)),
        "{got:?}"
    );
}

/// A failed try, a priority change, the trash, a retry out of it and a
/// cancel each make the event the job's history has.
pub async fn the_event_stream_tells_failures_the_trash_and_cancels<H: FeatureHarness>(h: &H) {
    let (listener, b) = (h.board().await, h.board().await);
    let q = unique_queue("events-fail");
    let mut log = heard_stream(&listener, &b, &q, false).await;
    let id = b.post(&q, NewJob::new("f").max_attempts(3)).await.unwrap();
    b.set_priority(&q, &id, Priority::HIGH).await.unwrap();
    let c = b.claim(&[&q], "w-ev", LONG, 1).await.unwrap().remove(0);
    let retry = Abandon::Retry {
        delay: Duration::ZERO,
        error: "flaky".into(),
    };
    b.abandon(c.lease, retry).await.unwrap();
    let c = b.claim(&[&q], "w-ev", LONG, 1).await.unwrap().remove(0);
    b.trash(c.lease, "fatal: bad input").await.unwrap();
    let retried = b.retry(&q, std::slice::from_ref(&id)).await.unwrap();
    assert!(retried.iter().all(|r| r.is_ok()), "{retried:?}");
    b.cancel(&q, std::slice::from_ref(&id), false).await.unwrap();
    let got = events_until(&mut log, &q, |got| got.iter().any(|e| e["event"] == "cancelled")).await;
    let want = [
        "posted",
        "priority",
        "claimed",
        "failed",
        "retried",
        "claimed",
        "trashed",
        "retried",
        "cancelled",
    ];
    assert_eq!(kinds_of(&got, &id), want, "{got:#?}");
}

/// The tracked stream has the events of jobs tracked at post or later
/// (from their tracking on), and none of the others'; the full stream has
/// them all.
pub async fn the_tracked_stream_carries_only_tracked_jobs<H: FeatureHarness>(h: &H) {
    let (listener, b) = (h.board().await, h.board().await);
    let q = unique_queue("tracked");
    let mut tracked = heard_stream(&listener, &b, &q, true).await;
    let mut log = heard_stream(&listener, &b, &q, false).await;
    let a = b.post(&q, NewJob::new("a").track()).await.unwrap();
    let quiet = b.post(&q, NewJob::new("quiet")).await.unwrap();
    let c = b.post(&q, NewJob::new("c")).await.unwrap();
    b.track(&q, &c).await.unwrap();
    for job in b.claim(&[&q], "w-tracked", LONG, 3).await.unwrap() {
        b.consume(job.lease).await.unwrap();
    }
    let consumed =
        |got: &[Value], jobs: &[&JobId]| jobs.iter().all(|j| kinds_of(got, j).contains(&"consumed"));
    let got = events_until(&mut tracked, &q, |got| consumed(got, &[&a, &c])).await;
    let all = events_until(&mut log, &q, |got| consumed(got, &[&a, &quiet, &c])).await;
    assert_eq!(kinds_of(&all, &quiet), ["posted", "claimed", "consumed"]);
    // Anything of the quiet job would have come before c's consume.
    assert_eq!(kinds_of(&got, &a), ["posted", "claimed", "consumed"], "{got:?}");
    // ZooKeeper's stream asks whether a job is tracked when it reads the
    // event, so c's post may show too.
    let c_kinds = kinds_of(&got, &c);
    assert!(c_kinds.ends_with(&["track", "claimed", "consumed"]), "{got:?}");
    assert!(c_kinds.len() == 3 || c_kinds[0] == "posted", "{got:?}");
    assert!(
        kinds_of(&got, &quiet).is_empty(),
        "an untracked job on the tracked stream: {got:?}"
    );
}
