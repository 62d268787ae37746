//! Suspects end to end: the real `jobworker` binary against a real Redis
//! and a real ZooKeeper. The jobs of a worker that died holding several are handed out alone,
//! to a worker holding nothing. A worker busy with a long job while only
//! suspects are ready neither takes them nor spins on the board: it waits
//! for its job to finish, then runs each suspect alone.

mod common;

use std::time::Duration;

use common::runs::logged;
use common::zookeeper::{board as zk_board, fresh_root};
use common::*;
use jobworker::board::Recovery;
use jobworker::redis::RedisBoard;
use jobworker::{Board, JobId, JobState, NewJob};
use jobworker_examples::scripted::{Action, Script};
use jobworker_tests::{shared_zookeeper, unique_queue, wait_until};

/// What the test lets a busy worker send the board in two seconds while
/// only suspects are ready: its interval, the heartbeat, the maintenance
/// and ZooKeeper's pings come to a few dozen; the loop this guards against
/// sent thousands.
const QUIET: u64 = 150;

const DEAD: &str = "killed by signal 9 (SIGKILL)";

/// Script calls (FCALL, EVALSHA and EVAL) the server has run so far.
async fn script_calls(board: &RedisBoard) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut board.connection())
        .await
        .unwrap();
    info.lines()
        .filter(|l| {
            ["cmdstat_fcall:", "cmdstat_evalsha:", "cmdstat_eval:"]
                .iter()
                .any(|c| l.starts_with(c))
        })
        .filter_map(|l| l.split("calls=").nth(1)?.split(',').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_busy_worker_waits_for_its_job_while_only_suspects_are_ready() {
    let (_serial, board, q, key) = setup("e2e-suspects").await;
    // Two jobs held by a worker that will be found dead.
    let mut suspects = Vec::new();
    for _ in 0..2 {
        suspects.push(post(&board, &q, &script(Action::Ok, 0, &key), 5).await);
    }
    let held = board
        .claim(&[&q], "dead-worker", Duration::from_secs(300), 2)
        .await
        .unwrap();
    assert_eq!(held.len(), 2);

    let mut sup = Supervisor::start(&q, &["--workers", "1", "--concurrency", "2"]);
    let long = post(&board, &q, &script(Action::Sleep, 6000, &key), 5).await;
    wait_until(
        sup.and_log("the long job to start"),
        Duration::from_secs(30),
        || async { runs(&board, &key).await.contains_key(long.as_str()) },
    )
    .await;
    board.recover_owner(&q, "dead-worker", DEAD).await.unwrap();

    // The worker holds one job and has a free slot; the suspects are not
    // for it.
    let before = script_calls(&board).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let calls = script_calls(&board).await - before;
    assert_eq!(state(&board, &q, &long).await, JobState::Claimed, "{}", sup.log());
    eprintln!("redis: {calls} script calls in 2 s while only suspects were ready");
    assert!(
        calls < QUIET,
        "{calls} script calls in 2 s while only suspects were ready: {}",
        sup.log()
    );

    // Once the long job is done, each suspect runs alone, once.
    for id in suspects.iter().chain([&long]) {
        wait_state(&board, &q, id, JobState::Completed, 60).await;
    }
    let runs = runs(&board, &key).await;
    for id in suspects.iter().chain([&long]) {
        assert_eq!(runs.get(id.as_str()), Some(&1), "{}", sup.log());
    }
    sup.stop_cleanly(Duration::from_secs(30));
}

/// Requests ZooKeeper has received so far (`mntr`).
fn zookeeper_requests() -> u64 {
    let mntr = shared_zookeeper().four_letter_word("mntr").expect("mntr");
    mntr.lines()
        .find_map(|l| l.strip_prefix("zk_packets_received")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no zk_packets_received in mntr: {mntr}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn on_zookeeper_a_busy_worker_waits_for_its_job_while_only_suspects_are_ready() {
    let _serial = serial().await;
    let connect = fresh_root("zk-suspects-busy");
    let board = zk_board(&connect).await;
    let q = unique_queue("zk-suspects-busy");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let zk_post = |s: Script| {
        let (board, q) = (&board, &q);
        async move {
            board
                .post(q, NewJob::new("scripted").args(&s).unwrap().max_attempts(5))
                .await
                .unwrap()
        }
    };
    let mut suspects: Vec<JobId> = Vec::new();
    for _ in 0..2 {
        suspects.push(zk_post(logged(Action::Ok, 0, &log)).await);
    }
    let held = board
        .claim(&[&q], "dead-worker", Duration::from_secs(300), 2)
        .await
        .unwrap();
    assert_eq!(held.len(), 2);

    let args = ["--workers", "1", "--concurrency", "2"];
    let mut sup = Supervisor::start_on(&["--zookeeper", &connect], &q, &args, None);
    let long = zk_post(logged(Action::Sleep, 6000, &log)).await;
    wait_until(
        sup.and_log("the long job to start"),
        Duration::from_secs(30),
        || async {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains(long.as_str())
        },
    )
    .await;
    board.recover_owner(&q, "dead-worker", DEAD).await.unwrap();

    let before = zookeeper_requests();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let requests = zookeeper_requests() - before;
    assert_eq!(
        board.state(&q, &long).await.unwrap(),
        JobState::Claimed,
        "{}",
        sup.log()
    );
    eprintln!("zookeeper: {requests} requests in 2 s while only suspects were ready");
    assert!(
        requests < QUIET,
        "{requests} requests in 2 s while only suspects were ready: {}",
        sup.log()
    );

    for id in suspects.iter().chain([&long]) {
        wait_until(
            sup.and_log("every job to complete"),
            Duration::from_secs(60),
            || async { board.state(&q, id).await.unwrap() == JobState::Completed },
        )
        .await;
    }
    sup.stop_cleanly(Duration::from_secs(30));
}
