//! The board's Prometheus metrics on ZooKeeper, against a real server:
//! every state is rendered, failure groups, settings and the daily
//! statistics included.

use std::collections::HashMap;
use std::time::Duration;

use jobworker::board::{Admin, Inspect, Presence, WorkerInfo};
use jobworker::metrics::render;
use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{AnyBoard, Board, NewJob};
use jobworker_tests::{shared_zookeeper, unique_queue};
use prometheus_parse::{Scrape, Value};

/// The number of the sample `metric` with exactly `labels`, if there is one.
fn num(s: &Scrape, metric: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let want: HashMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let sample = s
        .samples
        .iter()
        .find(|x| x.metric == metric && *x.labels == want)?;
    match sample.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => Some(v),
        ref other => panic!("{metric}{labels:?} is not a number: {other:?}"),
    }
}

/// 4 jobs posted, 3 claimed, 1 of them consumed and 1 trashed, 1 waiting
/// for the one still claimed; one worker registered.
#[tokio::test]
async fn zookeeper_renders_every_state() {
    let root = unique_queue("zk-metrics");
    let connect = format!("{}/{root}", shared_zookeeper().connect_string());
    let b = ZooKeeperBoard::connect(ZooKeeperOptions::new(connect))
        .await
        .unwrap();
    let q = unique_queue("metrics");
    for _ in 0..4 {
        b.post(&q, NewJob::new("z")).await.unwrap();
    }
    let mut got = b
        .claim(&[&q], "w-metrics", Duration::from_secs(60), 3)
        .await
        .unwrap();
    assert_eq!(got.len(), 3);
    b.consume(got.pop().unwrap().lease).await.unwrap();
    b.trash(got.pop().unwrap().lease, "fatal: bad input")
        .await
        .unwrap();
    let held = got[0].lease.job().clone();
    b.post(&q, NewJob::new("w").depends_on(held)).await.unwrap();
    let now = b.server_ms().await.unwrap() as u64;
    let worker = WorkerInfo {
        owner: "w-metrics".into(),
        host: "test-host".into(),
        pid: std::process::id(),
        slot: 0,
        queues: vec![q.clone()],
        concurrency: 1,
        started_ms: now,
        beat_ms: now,
        ttl_ms: 600_000,
        jobs: vec![got[0].lease.job().as_str().to_owned()],
    };
    b.record_worker(&worker).await.unwrap();
    b.set_limit(&q, Some(3)).await.unwrap();

    let text = render(&AnyBoard::ZooKeeper(b.clone()), std::slice::from_ref(&q))
        .await
        .unwrap();
    let s = Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let own = b
        .overview(std::slice::from_ref(&q))
        .await
        .unwrap()
        .remove(0)
        .counts;
    let state = |name: &str| num(&s, "jobworker_jobs", &[("queue", &q), ("state", name)]);
    for (name, n) in [
        ("ready", 1),
        ("claimed", 1),
        ("completed", 1),
        ("scheduled", 0),
        ("trashed", 1),
        ("cancelled", 0),
    ] {
        assert_eq!(state(name), Some(n as f64), "{name}\n{text}");
    }
    assert_eq!(
        state("ready"),
        own.ready.map(|n| n as f64),
        "the board's own count"
    );
    assert_eq!(state("waiting"), Some(1.0), "{text}");
    assert!(num(&s, "jobworker_oldest_ready_age_seconds", &[("queue", &q)]).unwrap() >= 0.0);
    assert_eq!(num(&s, "jobworker_workers_alive", &[]), Some(1.0));
    assert_eq!(num(&s, "jobworker_jobs_held", &[]), Some(1.0));
    assert_eq!(
        num(&s, "jobworker_trashed_jobs", &[("queue", &q), ("group", "fatal")]),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        num(&s, "jobworker_queue_paused", &[("queue", &q)]),
        Some(0.0),
        "{text}"
    );
    assert_eq!(
        num(&s, "jobworker_queue_limit", &[("queue", &q)]),
        Some(3.0),
        "{text}"
    );
    let one = |metric: &str| num(&s, metric, &[("queue", &q)]);
    assert_eq!(one("jobworker_jobs_completed_total"), Some(1.0), "{text}");
    assert_eq!(one("jobworker_jobs_failed_total"), Some(1.0), "{text}");
    assert_eq!(one("jobworker_jobs_retried_total"), Some(0.0), "{text}");
    assert_eq!(one("jobworker_run_seconds_count"), Some(1.0), "{text}");
    assert_eq!(
        one("jobworker_wait_seconds_count"),
        Some(2.0),
        "the two claims that ended waited (the held one is counted when it ends)"
    );
}
