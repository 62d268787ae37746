//! The board's Prometheus metrics (`jobworker::metrics::render`) against a
//! real server: a known workload, rendered, parsed back with
//! prometheus-parse and compared with what the board itself says and what
//! the workload must have left.

use std::collections::HashMap;

use jobworker::board::{Presence, WorkerInfo, STATES};
use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::metrics::render;
use jobworker::redis::RedisBoard;
use jobworker::{AnyBoard, Board, NewJob};
use jobworker_tests::features::*;
use jobworker_tests::unique_queue;
use prometheus_parse::{Scrape, Value};

/// A rendering of `queues`, parsed (rendered on a spawned task, as a web
/// server's handler would: the render is `Send`).
async fn scrape(b: &RedisBoard, queues: &[&String]) -> Scrape {
    let queues: Vec<String> = queues.iter().map(|q| q.to_string()).collect();
    let board = AnyBoard::Redis(b.clone());
    let text = tokio::spawn(async move { render(&board, &queues).await })
        .await
        .unwrap()
        .unwrap();
    assert!(text.ends_with("# EOF\n"), "an OpenMetrics exposition:\n{text}");
    Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
}

/// The value of the sample `metric` with exactly `labels`, if there is one.
fn find(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<Value> {
    let want: HashMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let found: Vec<&Value> = s
        .samples
        .iter()
        .filter(|x| x.metric == metric && *x.labels == want)
        .map(|x| &x.value)
        .collect();
    assert!(
        found.len() <= 1,
        "one sample of {metric}{labels:?}, got {found:?}"
    );
    found.first().map(|v| (*v).clone())
}

/// The number of the sample `metric` with exactly `labels`.
fn num(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    match find(s, metric, labels) {
        Some(Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v)) => v,
        other => panic!("no number for {metric}{labels:?}: {other:?}"),
    }
}

/// The cumulative buckets of histogram `metric` of `queue`, checked to
/// rise and to end with +Inf; returns the +Inf bucket's count.
fn histogram_total(s: &Scrape, metric: &str, queue: &str) -> f64 {
    let Some(Value::Histogram(buckets)) = find(s, metric, &[("queue", queue)]) else {
        panic!("no histogram {metric} of {queue}");
    };
    assert!(buckets
        .windows(2)
        .all(|w| w[0].less_than < w[1].less_than && w[0].count <= w[1].count));
    let last = buckets.last().unwrap();
    assert_eq!(last.less_than, f64::INFINITY, "{buckets:?}");
    assert_eq!(buckets.len(), 149, "every qless bucket, always");
    last.count
}

/// Registers a live worker serving `queues` and holding `jobs`.
async fn record_worker(b: &RedisBoard, queues: &[&String], jobs: Vec<String>) {
    let now = server_ms(b).await as u64;
    let info = WorkerInfo {
        owner: "metrics-worker".into(),
        host: "test-host".into(),
        pid: std::process::id(),
        slot: 0,
        queues: queues.iter().map(|q| q.to_string()).collect(),
        concurrency: 1,
        started_ms: now,
        beat_ms: now,
        ttl_ms: 600_000,
        jobs,
    };
    b.record_worker(&info).await.unwrap();
}

/// 8 jobs posted and one delayed; 5 claimed, of which 2 consumed, 2
/// trashed (groups `fatal` and `timeout`) and 1 still held; 3 left ready.
#[tokio::test]
async fn a_known_workload_renders_the_boards_own_numbers() {
    let b = private_prefix_board(&unique_queue("metrics-prefix")).await;
    let (q, empty) = (unique_queue("metrics"), unique_queue("metrics-empty"));
    post_n(&b, &q, "m", 8).await;
    b.post(&q, NewJob::new("later").delay(LONG)).await.unwrap();
    let mut got = claim(&b, &q, 5).await;
    assert_eq!(got.len(), 5);
    let held = got.pop().unwrap();
    for c in got.drain(..2) {
        b.consume(c.lease).await.unwrap();
    }
    let mut trash = got.into_iter();
    b.trash(trash.next().unwrap().lease, "fatal: bad input")
        .await
        .unwrap();
    b.trash(trash.next().unwrap().lease, "timeout: took too long")
        .await
        .unwrap();
    record_worker(&b, &[&q], vec![held.lease.job().as_str().to_owned()]).await;

    let s = scrape(&b, &[&q, &empty]).await;
    let own = b
        .overview(std::slice::from_ref(&q))
        .await
        .unwrap()
        .remove(0)
        .counts;
    let expected = [
        ("ready", 3),
        ("scheduled", 1),
        ("waiting", 0),
        ("claimed", 1),
        ("completed", 2),
        ("trashed", 2),
        ("cancelled", 0),
        ("quarantined", 0),
    ];
    for (state, (name, n)) in STATES.iter().zip(expected) {
        assert_eq!(state.as_str(), name);
        let got = num(&s, "jobworker_jobs", &[("queue", &q), ("state", name)]);
        assert_eq!(Some(got as u64), own.get(*state), "{name}: the board's own count");
        assert_eq!(got, n as f64, "{name}: what the workload left");
        assert_eq!(
            num(&s, "jobworker_jobs", &[("queue", &empty), ("state", name)]),
            0.0
        );
    }
    let one = |metric: &str| num(&s, metric, &[("queue", &q)]);
    assert_eq!(one("jobworker_jobs_completed_total"), 2.0);
    assert_eq!(one("jobworker_jobs_failed_total"), 2.0);
    assert_eq!(one("jobworker_jobs_retried_total"), 0.0);
    assert_eq!(one("jobworker_run_seconds_count"), 2.0);
    assert_eq!(histogram_total(&s, "jobworker_run_seconds", &q), 2.0);
    assert_eq!(one("jobworker_wait_seconds_count"), 5.0, "five claims waited");
    assert_eq!(histogram_total(&s, "jobworker_wait_seconds", &q), 5.0);
    assert!(one("jobworker_run_seconds_sum") >= 0.0);
    assert!(one("jobworker_oldest_ready_age_seconds") >= 0.0);
    assert_eq!(one("jobworker_queue_paused"), 0.0);
    assert_eq!(
        find(&s, "jobworker_queue_limit", &[("queue", &q)]),
        None,
        "no limit set"
    );
    for group in ["fatal", "timeout"] {
        assert_eq!(
            num(&s, "jobworker_trashed_jobs", &[("queue", &q), ("group", group)]),
            1.0
        );
    }
    assert_eq!(num(&s, "jobworker_workers_alive", &[]), 1.0);
    assert_eq!(num(&s, "jobworker_jobs_held", &[]), 1.0);
    assert_eq!(one("jobworker_workers_alive_by_queue"), 1.0);
    assert_the_empty_queue_has_zeros(&s, &empty);
    assert!(
        s.docs["jobworker_jobs_completed"].contains("resets at 00:00 UTC"),
        "{:?}",
        s.docs
    );
}

fn assert_the_empty_queue_has_zeros(s: &Scrape, empty: &str) {
    let zero = |metric: &str| assert_eq!(num(s, metric, &[("queue", empty)]), 0.0, "{metric} of {empty}");
    for metric in [
        "jobworker_jobs_completed_total",
        "jobworker_jobs_failed_total",
        "jobworker_jobs_retried_total",
        "jobworker_run_seconds_count",
        "jobworker_wait_seconds_count",
        "jobworker_run_seconds_sum",
        "jobworker_oldest_ready_age_seconds",
        "jobworker_queue_paused",
        "jobworker_workers_alive_by_queue",
    ] {
        zero(metric);
    }
    assert_eq!(histogram_total(s, "jobworker_run_seconds", empty), 0.0);
    let groups = s.samples.iter().filter(|x| x.metric == "jobworker_trashed_jobs");
    assert!(
        groups.clone().all(|x| x.labels.get("queue") != Some(empty)),
        "no failure group"
    );
}

/// Two queues' samples carry their own labels: what one holds does not
/// show under the other.
#[tokio::test]
async fn each_queue_is_labelled_apart() {
    let (b, [a, p]) = board_and_queues(["metrics-a", "metrics-p"]).await;
    post_n(&b, &a, "a", 2).await;
    post_n(&b, &p, "p", 1).await;
    claim_and_consume(&b, &p).await;
    b.pause(&p).await.unwrap();
    b.set_limit(&p, Some(3)).await.unwrap();

    let s = scrape(&b, &[&a, &p]).await;
    let state = |q: &str, state: &str| num(&s, "jobworker_jobs", &[("queue", q), ("state", state)]);
    assert_eq!((state(&a, "ready"), state(&p, "ready")), (2.0, 0.0));
    assert_eq!((state(&a, "completed"), state(&p, "completed")), (0.0, 1.0));
    let of = |metric: &str, q: &str| num(&s, metric, &[("queue", q)]);
    assert_eq!(of("jobworker_jobs_completed_total", &a), 0.0);
    assert_eq!(of("jobworker_jobs_completed_total", &p), 1.0);
    assert_eq!(histogram_total(&s, "jobworker_run_seconds", &a), 0.0);
    assert_eq!(histogram_total(&s, "jobworker_run_seconds", &p), 1.0);
    assert_eq!(
        (of("jobworker_queue_paused", &a), of("jobworker_queue_paused", &p)),
        (0.0, 1.0)
    );
    assert_eq!(find(&s, "jobworker_queue_limit", &[("queue", &a)]), None);
    assert_eq!(of("jobworker_queue_limit", &p), 3.0);
    assert!(of("jobworker_oldest_ready_age_seconds", &a) >= 0.0);
    assert_eq!(of("jobworker_oldest_ready_age_seconds", &p), 0.0, "none ready");
}

/// A board that cannot be read fails the render (unlike a capability the
/// backend does not support, which is left out).
#[tokio::test]
async fn an_unreachable_board_fails_the_render() {
    let mut server = RedisServer::start(ServerOptions::default()).unwrap();
    let b = RedisBoard::connect(&server.url()).await.unwrap();
    let q = unique_queue("metrics-gone");
    assert!(
        !scrape(&b, &[&q]).await.samples.is_empty(),
        "renders while the server runs"
    );
    server.kill().unwrap();
    let err = render(&AnyBoard::Redis(b), &[q]).await.unwrap_err();
    assert!(!err.is_unsupported(), "{err}");
}
