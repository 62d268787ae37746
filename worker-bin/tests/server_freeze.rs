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
//! run out. And a supervisor stopped during a freeze: it exits soon after
//! its grace, and its workers' jobs run again once their leases run out;
//! stopped while the server restarts: the killed worker's lease is given
//! back once the server is back, before the stop's deadline. The tests
//! run side by side, each on a server of its own: what they check does
//! not hang on timing (the handlers stop during the freeze, the second
//! runs come after it), except the stop during a freeze, which must end
//! within a bound well above its timers and timeouts.

mod common;

use std::time::Duration;

use common::cli::private_redis;
use common::runs::{logged, outcome, unrecorded, wait_for_runs};
use common::*;
use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::redis::RedisBoard;
use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Board, JobId, NewJob};
use jobworker_examples::scripted::Action;
use jobworker_tests::chaos::runs::Runs;
use jobworker_tests::{unique_queue, wait_for_blocking, ZooKeeperServer};

const SHORT: usize = 2000;
const LONG: usize = 8;
/// The workers' lease (`--expiry`), shorter than the freeze.
const EXPIRY_S: &str = "5";
const FREEZE: Duration = Duration::from_secs(10);
/// A long job's run: it outlasts the freeze.
const LONG_MS: u64 = 15_000;

async fn post(board: &impl Board, q: &str, job: NewJob, n: usize) -> Vec<JobId> {
    let posted = board.post_many(q, &vec![job; n]).await.unwrap();
    posted.into_iter().map(Result::unwrap).collect()
}

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
    let mut ids = post(board, &q, long, LONG).await;
    ids.extend(post(board, &q, short, SHORT).await);
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
    let url = server.url();
    let board = RedisBoard::connect(&url).await.unwrap();
    let q = unique_queue("freeze-kill");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut script = logged(Action::Sleep, 600_000, &log);
    script.until_attempt = 1;
    let ids = post(&board, &q, NewJob::new("scripted").args(&script).unwrap(), 3).await;
    let args = ["--workers", "3", "--concurrency", "1", "--expiry", "600"];
    let mut sup = Supervisor::start_on(&["--redis", &url], &q, &args, None);
    let mut runs = Runs::new(&log);
    wait_for_runs(
        &sup,
        "the three jobs to run",
        Duration::from_secs(120),
        &mut runs,
        |r| r.open_runs().count() == 3,
    )
    .await;
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
        &mut runs,
        |r| r.ok_jobs() == 3,
    )
    .await;
    sup.stop_cleanly(Duration::from_secs(60));
    let out = outcome(&ids, runs.all(), &unrecorded(&sup.log()));
    assert_eq!(
        (out.never_ran, out.ran_again, out.concurrent),
        (0, 0, 0),
        "{out:?}"
    );
    // What the test is about happened: a recovery failed during the freeze.
    assert!(sup.log().contains("cannot recover leases yet"), "{}", sup.log());
}

/// The supervisor's grace in the stop test (`--grace`, seconds); it kills
/// the workers 5 s after it.
const GRACE_S: &str = "1";

/// A supervisor stopped (SIGTERM) while the Redis server is frozen: its
/// workers cannot give their jobs back and are killed after the grace; the
/// supervisor tries to give back their leases one call at a time until
/// its stop's deadline, not once per worker (each try waits out its
/// calls' timeouts, 4–6 s, and so did each worker's entry removal: the
/// stop took 40 s with four workers), leaves the rest to the leases'
/// expiry and exits (12 s). Once the
/// server answers, a new supervisor runs every job again when its lease
/// has run out: none is lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_supervisor_stopped_during_a_freeze_exits_soon_and_loses_no_job() {
    const WORKERS: usize = 4;
    let server = private_redis();
    let url = server.url();
    let board = RedisBoard::connect(&url).await.unwrap();
    let q = unique_queue("freeze-stop");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut script = logged(Action::Sleep, 600_000, &log);
    script.until_attempt = 1;
    let job = NewJob::new("scripted").args(&script).unwrap();
    let ids = post(&board, &q, job, WORKERS).await;
    let workers = WORKERS.to_string();
    let args = [
        "--workers",
        &workers,
        "--concurrency",
        "1",
        "--expiry",
        "10",
        "--grace",
        GRACE_S,
    ];
    let mut sup = Supervisor::start_on(&["--redis", &url], &q, &args, None);
    let mut runs = Runs::new(&log);
    wait_for_runs(
        &sup,
        "every job to run",
        Duration::from_secs(120),
        &mut runs,
        |r| r.open_runs().count() == WORKERS,
    )
    .await;
    // SAFETY: a plain signal to the test's own server.
    unsafe { libc::kill(server.pid() as i32, libc::SIGSTOP) };
    let stopping = std::time::Instant::now();
    sup.signal(libc::SIGTERM);
    // The grace, the kill 5 s later, one recovery's timeouts (up to 6 s),
    // and room for a slow machine.
    let status = sup.wait_exit(Duration::from_secs(60));
    let took = stopping.elapsed();
    unsafe { libc::kill(server.pid() as i32, libc::SIGCONT) };
    eprintln!("stopping took {took:?}");
    assert_eq!(status.code(), Some(0), "{}", sup.log());
    assert!(
        took < Duration::from_secs(25),
        "stopping took {took:?}:\n{}",
        sup.log()
    );
    let mut again = Supervisor::start_on(&["--redis", &url], &q, &args, None);
    wait_for_runs(
        &again,
        "every job to run again",
        Duration::from_secs(120),
        &mut runs,
        |r| r.ok_jobs() == WORKERS,
    )
    .await;
    again.stop_cleanly(Duration::from_secs(60));
    let unrecorded = unrecorded(&format!("{}{}", sup.log(), again.log()));
    let out = outcome(&ids, runs.all(), &unrecorded);
    assert_eq!(
        (out.never_ran, out.ran_again, out.concurrent),
        (0, 0, 0),
        "{out:?}"
    );
}

/// Stops a supervisor (SIGTERM, `--grace grace`) while its Redis server
/// restarts: the server stops (refusing connections) as the stop begins
/// and is back, with its data (AOF), `back` later (`None`: once the
/// supervisor has killed the worker). The one job, whose
/// handler does `action` for `millis` on its first attempt, must run
/// again and succeed under a new supervisor long before its lease (10
/// minutes) runs out: it was given back once the server answered.
async fn stop_while_the_server_restarts(action: Action, millis: u64, grace: &str, back: Option<Duration>) {
    let mut server = RedisServer::start(ServerOptions {
        appendonly: true,
        ..ServerOptions::default()
    })
    .expect("start a private redis-server");
    let url = server.url();
    let q = unique_queue("restart-stop");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut script = logged(action, millis, &log);
    script.until_attempt = 1;
    let job = NewJob::new("scripted").args(&script).unwrap();
    let ids = post(&RedisBoard::connect(&url).await.unwrap(), &q, job, 1).await;
    let args = [
        "--workers",
        "1",
        "--concurrency",
        "1",
        "--expiry",
        "600",
        "--grace",
        grace,
    ];
    let mut sup = Supervisor::start_on(&["--redis", &url], &q, &args, None);
    let mut runs = Runs::new(&log);
    wait_for_runs(&sup, "the job to run", Duration::from_secs(120), &mut runs, |r| {
        r.open_runs().count() == 1
    })
    .await;
    server.stop().unwrap();
    sup.signal(libc::SIGTERM);
    match back {
        Some(back) => std::thread::sleep(back),
        None => {
            let what = "the worker to be killed";
            wait_for_blocking(what, Duration::from_secs(60), || {
                sup.worker_pids().is_empty().then_some(())
            });
        }
    }
    server.restart().unwrap();
    let status = sup.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{}", sup.log());
    let mut again = Supervisor::start_on(&["--redis", &url], &q, &args, None);
    let what = "the job to run again, long before its lease runs out";
    wait_for_runs(&again, what, Duration::from_secs(60), &mut runs, |r| {
        r.ok_jobs() == 1
    })
    .await;
    again.stop_cleanly(Duration::from_secs(60));
    let unrecorded = unrecorded(&format!("{}{}", sup.log(), again.log()));
    let out = outcome(&ids, runs.all(), &unrecorded);
    assert_eq!(
        (out.never_ran, out.ran_again, out.concurrent),
        (0, 0, 0),
        "{out:?}"
    );
}

/// The worker's handler never yields: the worker is killed 5 s after the
/// grace, and the supervisor's recovery of its lease fails at once; it
/// tries again until its stop's deadline (the kill + 5 s). The server is
/// back right after the kill, before that deadline.
#[tokio::test(flavor = "multi_thread")]
async fn a_supervisor_stopped_while_the_server_restarts_gives_the_lease_back_once_it_answers() {
    stop_while_the_server_restarts(Action::Spin, 600_000, GRACE_S, None).await;
}

/// The worker stops its handler at the grace's end (3 s) and gives its
/// job back itself (not counted: the second run sleeps its 10 s too): its
/// call waits for the server, back after 3.5 s.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_stopped_while_the_server_restarts_gives_its_job_back_once_it_answers() {
    stop_while_the_server_restarts(Action::Sleep, 10_000, "3", Some(Duration::from_millis(3500))).await;
}
