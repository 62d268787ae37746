//! Cancel of a running job on ZooKeeper, end to end: the real `jobworker`
//! binary with a forked worker, a handler sleeping 60 s under a 30 s
//! lease, and `jobworker cancel` from the command line. The worker hears
//! the cancel on a watch of its cancel notes and stops the handler; the
//! run log's wall-clock times give how long that took.

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::runs::logged;
use common::Supervisor;
use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Board, JobId, JobState, NewJob};
use jobworker_examples::scripted::run_log::RunLine;
use jobworker_examples::scripted::Action;
use jobworker_tests::{shared_zookeeper, unique_queue, wait_for, wait_until};

/// The run log's lines of job `id`.
fn lines_of(log: &Path, id: &JobId) -> Vec<RunLine> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(RunLine::parse)
        .filter(|l| l.id() == id.as_str())
        .collect()
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as u64
}

/// Must-show: `jobworker cancel` of a running job on ZooKeeper stops its
/// handler at once, with a 30 s lease; the job is cancelled, ran once, and
/// the worker's one slot runs the next job.
#[tokio::test(flavor = "multi_thread")]
async fn cancel_of_a_running_job_stops_its_handler() {
    let connect = format!(
        "{}/{}",
        shared_zookeeper().connect_string(),
        unique_queue("zk-cancel")
    );
    let board = ZooKeeperBoard::connect(ZooKeeperOptions::new(connect.clone()))
        .await
        .unwrap();
    let q = unique_queue("zk-cancel");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut sup = Supervisor::start_on(
        &["--zookeeper", &connect],
        &q,
        &["--workers", "1", "--expiry", "30"],
        None,
    );
    let long = NewJob::new("scripted")
        .args(&logged(Action::Sleep, 60_000, &log))
        .unwrap();
    let id = board.post(&q, long).await.unwrap();
    wait_until(
        sup.and_log("the long job to start"),
        Duration::from_secs(60),
        || async {
            lines_of(&log, &id)
                .iter()
                .any(|l| matches!(l, RunLine::Start { .. }))
        },
    )
    .await;

    let cancelled_us = now_us();
    let out = common::cli::jobworker_command()
        .args(["--zookeeper", &connect, "cancel", "-q", &q, id.as_str()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ended_us = wait_for(
        sup.and_log("the handler to stop"),
        Duration::from_secs(60),
        || async {
            lines_of(&log, &id).iter().find_map(|l| match l {
                RunLine::End { at_us, .. } => Some(*at_us),
                RunLine::Start { .. } => None,
            })
        },
    )
    .await;
    let stopped_in = Duration::from_micros(ended_us.saturating_sub(cancelled_us));
    println!("the handler stopped {stopped_in:?} after `jobworker cancel` was started (30 s lease)");

    // The one slot is free again: the next job runs.
    let next = board
        .post(
            &q,
            NewJob::new("scripted")
                .args(&logged(Action::Ok, 0, &log))
                .unwrap(),
        )
        .await
        .unwrap();
    wait_until(
        sup.and_log("the next job to complete"),
        Duration::from_secs(60),
        || async { board.state(&q, &next).await.unwrap() == JobState::Completed },
    )
    .await;
    assert_eq!(board.state(&q, &id).await.unwrap(), JobState::Cancelled);
    let starts = lines_of(&log, &id)
        .iter()
        .filter(|l| matches!(l, RunLine::Start { .. }))
        .count();
    assert_eq!(starts, 1, "the cancelled job ran once");
    assert!(
        stopped_in < Duration::from_secs(20),
        "the handler ran {stopped_in:?} past its cancel; log:\n{}",
        sup.log()
    );
    sup.signal(libc::SIGTERM);
    assert!(sup.wait_exit(Duration::from_secs(30)).success(), "{}", sup.log());
}
