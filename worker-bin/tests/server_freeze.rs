//! A board server frozen (SIGSTOP) during a drain for longer than the
//! workers' leases, then let go on (SIGCONT), on Redis and on ZooKeeper:
//! the real `jobworker` supervisor, two workers, short jobs and eight long
//! ones running across the freeze. The server answers nothing meanwhile,
//! so no lease can be extended; each long job's handler must stop before
//! its lease can have run out on the server, or the job runs twice at once
//! once the server wakes (seen on Redis: the worker's extend loop waited
//! on its hung extends, and the same worker claimed the job again while
//! its first run went on). And workers killed during a freeze: their
//! jobs come back as soon as the server answers, not when their leases
//! run out. The tests run side by side, each on a server of its own: what
//! they check does not hang on timing (the handlers stop during the
//! freeze, the second runs come after it). A supervisor stopped while its
//! server does not answer: `server_stop.rs`.

mod common;

use std::time::Duration;

use common::cli::private_redis;
use common::runs::{logged, outcome, unrecorded, wait_for_runs, FirstRuns};
use common::*;
use jobworker::redis::RedisBoard;
use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Board, NewJob};
use jobworker_examples::scripted::Action;
use jobworker_tests::chaos::runs::Runs;
use jobworker_tests::{unique_queue, ZooKeeperServer};

const SHORT: usize = 2000;
const LONG: usize = 8;
/// The workers' lease (`--expiry`), shorter than the freeze.
const EXPIRY_S: &str = "5";
const FREEZE: Duration = Duration::from_secs(10);
/// A long job's run: it outlasts the freeze.
const LONG_MS: u64 = 15_000;

/// Drains the jobs on `board` (named to the supervisor by `flags`) with
/// the server of `pid` frozen a while, and checks that every job ran to
/// success, none whose consume was acknowledged ran again, and none ran
/// twice at once.
async fn drain_through_a_freeze(board: &impl Board, flags: &[&str], pid: u32) {
    let q = unique_queue("freeze");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let long = NewJob::new("scripted")
        .args(&logged(Action::Sleep, LONG_MS, &log))
        .unwrap();
    let short = NewJob::new("scripted")
        .args(&logged(Action::Ok, 5, &log))
        .unwrap();
    let mut ids = post_copies(board, &q, long, LONG).await;
    ids.extend(post_copies(board, &q, short, SHORT).await);
    let args = ["--workers", "2", "--concurrency", "8", "--expiry", EXPIRY_S];
    let mut sup = Supervisor::start_on(flags, &q, &args, None);
    let mut runs = Runs::new(&log);
    let what = "the long jobs and a quarter of the rest to run";
    wait_for_runs(&sup, what, Duration::from_secs(120), &mut runs, |r| {
        r.ok_jobs() >= SHORT / 4 && r.open_runs().count() >= LONG
    })
    .await;
    // SAFETY: plain signals to the test's own server.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    std::thread::sleep(FREEZE);
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    wait_for_runs(
        &sup,
        "every job to run",
        Duration::from_secs(180),
        &mut runs,
        |r| r.ok_jobs() == LONG + SHORT,
    )
    .await;
    sup.stop_cleanly(Duration::from_secs(60));
    runs.poll().unwrap();
    let out = outcome(&ids, runs.all(), &unrecorded(&sup.log()));
    eprintln!("{} runs, {out:?}", runs.all().len());
    assert_eq!(
        (out.never_ran, out.ran_again, out.concurrent),
        (0, 0, 0),
        "{out:?}\n{}",
        sup.log()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_redis_server_runs_no_job_twice_at_once() {
    let server = private_redis();
    let url = server.url();
    let board = RedisBoard::connect(&url).await.unwrap();
    drain_through_a_freeze(&board, &["--redis", &url], server.pid()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_zookeeper_server_runs_no_job_twice_at_once() {
    let server = ZooKeeperServer::start(Default::default()).expect("start a private ZooKeeper");
    let connect = server.connect_string();
    let board = ZooKeeperBoard::connect(ZooKeeperOptions::new(&connect))
        .await
        .unwrap();
    drain_through_a_freeze(&board, &["--zookeeper", &connect], server.pid()).await;
}

/// A freeze longer than a supervisor's call waits (2 s, then once more on
/// a new connection): its recoveries fail while the server is frozen.
const KILL_FREEZE: Duration = Duration::from_secs(10);

/// Workers SIGKILLed while the Redis server is frozen: the supervisor's
/// recoveries of their leases fail and stay pending, and once the server
/// answers they give the jobs back, long before their leases (10 minutes)
/// run out; the second runs succeed.
#[tokio::test(flavor = "multi_thread")]
async fn jobs_of_workers_killed_during_a_freeze_come_back_once_the_server_answers() {
    let server = private_redis();
    let args = ["--workers", "3", "--concurrency", "1", "--expiry", "600"];
    let long = (Action::Sleep, 600_000);
    let (mut jobs, mut sup) = FirstRuns::running(&server.url(), "freeze-kill", long, 3, &args).await;
    // SAFETY: plain signals to the test's own server and workers.
    unsafe { libc::kill(server.pid() as i32, libc::SIGSTOP) };
    for pid in sup.worker_pids() {
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    std::thread::sleep(KILL_FREEZE);
    unsafe { libc::kill(server.pid() as i32, libc::SIGCONT) };
    wait_for_runs(
        &sup,
        "every job to run again",
        Duration::from_secs(120),
        &mut jobs.runs,
        |r| r.ok_jobs() == 3,
    )
    .await;
    sup.stop_cleanly(Duration::from_secs(60));
    let out = outcome(&jobs.ids, jobs.runs.all(), &unrecorded(&sup.log()));
    assert_eq!(
        (out.never_ran, out.ran_again, out.concurrent),
        (0, 0, 0),
        "{out:?}"
    );
    // What the test is about happened: a recovery failed during the freeze.
    assert!(sup.log().contains("cannot recover leases yet"), "{}", sup.log());
}
