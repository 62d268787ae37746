//! A redis-server frozen (SIGSTOP) during a drain for longer than the
//! workers' leases, then let go on (SIGCONT): the real `jobworker`
//! supervisor, two workers, short jobs and eight long ones running across
//! the freeze. The server answers nothing meanwhile, so no lease can be
//! extended; each long job's handler must stop before its lease can have
//! run out on the server, or the job runs twice at once once the server
//! wakes (seen: the worker's extend loop waited on its hung extends, and
//! the same worker claimed the job again while its first run went on).

mod common;

use std::time::Duration;

use common::cli::private_redis;
use common::runs::{logged, outcome, unrecorded};
use common::*;
use jobworker::redis::RedisBoard;
use jobworker::{JobId, NewJob};
use jobworker_examples::scripted::Action;
use jobworker_tests::chaos::runs::Runs;
use jobworker_tests::{unique_queue, wait_until};

const SHORT: usize = 2000;
const LONG: usize = 8;
/// The workers' lease (`--expiry`), shorter than the freeze.
const EXPIRY_S: &str = "5";
const FREEZE: Duration = Duration::from_secs(10);
/// A long job's run: it outlasts the freeze.
const LONG_MS: u64 = 15_000;

async fn post(board: &RedisBoard, q: &str, job: NewJob, n: usize) -> Vec<JobId> {
    let posted = board.post_many(q, &vec![job; n]).await.unwrap();
    posted.into_iter().map(Result::unwrap).collect()
}

/// Every job runs to success, none whose consume was acknowledged runs
/// again, and no job runs twice at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_drain_through_a_frozen_server_runs_no_job_twice_at_once() {
    let _serial = serial().await;
    let server = private_redis();
    let url = server.url();
    let board = RedisBoard::connect(&url).await.unwrap();
    let q = unique_queue("freeze");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let long = NewJob::new("scripted")
        .args(&logged(Action::Sleep, LONG_MS, &log))
        .unwrap();
    let short = NewJob::new("scripted")
        .args(&logged(Action::Ok, 5, &log))
        .unwrap();
    let mut ids = post(&board, &q, long, LONG).await;
    ids.extend(post(&board, &q, short, SHORT).await);
    let args = ["--workers", "2", "--concurrency", "8", "--expiry", EXPIRY_S];
    let mut sup = Supervisor::start_on(&["--redis", &url], &q, &args, None);
    let mut runs = Runs::new(&log);
    wait_until(
        sup.and_log("the long jobs and a quarter of the rest to run"),
        Duration::from_secs(120),
        || {
            runs.poll().unwrap();
            let (done, open) = (runs.ok_jobs(), runs.open_runs().count());
            async move { done >= SHORT / 4 && open >= LONG }
        },
    )
    .await;
    let pid = server.pid() as i32;
    // SAFETY: plain signals to the test's own redis-server.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(FREEZE);
    unsafe { libc::kill(pid, libc::SIGCONT) };
    wait_until(sup.and_log("every job to run"), Duration::from_secs(180), || {
        runs.poll().unwrap();
        let done = runs.ok_jobs();
        async move { done == LONG + SHORT }
    })
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
