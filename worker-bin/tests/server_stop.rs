//! A supervisor stopped (SIGTERM), or its worker restarted (HUP), while
//! its Redis server does not take what it is asked: frozen (SIGSTOP),
//! restarting (refusing connections) or taking no writes (a master turned
//! replica, as in a failover). The real `jobworker` supervisor and
//! workers, each test on a server of its own. The stop must end soon
//! after its grace, and every job must run again: given back once the
//! server answers, or left to run out where nobody could give it back,
//! never lost, and no crash counted on a job a worker meant to give
//! back.

mod common;

use std::time::Duration;

use common::cli::private_redis;
use common::runs::{wait_for_runs, FirstRuns};
use common::*;
use jobworker::embedded::{RedisServer, ServerOptions};
use jobworker::JobState;
use jobworker_examples::scripted::Action;
use jobworker_tests::wait_for_blocking;

/// The supervisor's grace in the stop tests (`--grace`, seconds); it
/// kills the workers 5 s after it.
const GRACE_S: &str = "1";
/// A lease that outlasts every wait of the tests (`--expiry`, seconds).
const LONG_LEASE_S: &str = "600";
/// How long a job may take to run again after a stop, with the margin a
/// busy machine needs; well within `LONG_LEASE_S`, so that under that
/// lease a give-back is told from an expiry.
const RUN_AGAIN: Duration = Duration::from_secs(120);

/// A supervisor stopped (SIGTERM) while the Redis server is frozen: its
/// workers cannot give their jobs back, give up 2 s after the grace and
/// exit; the supervisor tries to give back their leases one call at a
/// time until its stop's deadline, not once per worker (each try waits
/// out its calls' timeouts, 4–6 s: the stop took 40 s with four workers
/// killed and recovered one after another), leaves the rest to the
/// leases' expiry and exits (8–11 s). Once the server answers, a new
/// supervisor runs every job again when its lease has run out: none is
/// lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_supervisor_stopped_during_a_freeze_exits_soon_and_loses_no_job() {
    const WORKERS: usize = 4;
    let server = private_redis();
    let workers = WORKERS.to_string();
    let mut args = flags(&workers, "10", GRACE_S).to_vec();
    // Reads the counts every 250 ms (none during the stop once one failed).
    args.push("--progress");
    let long = (Action::Sleep, 600_000);
    let (jobs, mut sup) = FirstRuns::running(&server.url(), "freeze-stop", long, WORKERS, &args).await;
    // SAFETY: a plain signal to the test's own server.
    unsafe { libc::kill(server.pid() as i32, libc::SIGSTOP) };
    let stopping = std::time::Instant::now();
    sup.signal(libc::SIGTERM);
    // The grace, the workers' 2 s, one recovery's timeouts (up to 6 s),
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
    jobs.run_again(&sup, RUN_AGAIN).await;
}

/// A supervisor stopped (SIGTERM, `--grace 1`) while the Redis server is
/// frozen: its worker's stop calls cannot end, so the worker gives up on
/// them 2 s after the grace and exits with status 75 before the
/// supervisor's kill (5 s after the grace), and the job, thawed then, is
/// given back counting nothing or left to its lease (10 s), never
/// recovered as a crash's (a worker killed mid-stop had the crash counted
/// on its job: three such stops trash a job as a poison pill).
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_stopped_during_a_freeze_gives_up_on_the_board_before_its_kill_and_no_crash_is_counted() {
    let server = private_redis();
    let (job, mut sup) = one_job(&server.url(), (Action::Sleep, 10_000), "10", GRACE_S).await;
    // SAFETY: a plain signal to the test's own server.
    unsafe { libc::kill(server.pid() as i32, libc::SIGSTOP) };
    sup.signal(libc::SIGTERM);
    wait_for_no_worker(&sup);
    unsafe { libc::kill(server.pid() as i32, libc::SIGCONT) };
    let status = sup.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{}", sup.log());
    let shown = job.shown().await;
    let crashed = |s: &Option<String>| s.as_deref().is_some_and(|s| s.contains("crash"));
    assert!(
        !crashed(&shown[0].reason) && !crashed(&shown[0].group),
        "{:?}\n{}",
        shown[0],
        sup.log()
    );
    job.run_again(&sup, RUN_AGAIN).await;
}

/// The flags of the tests' supervisors: `workers` worker processes of
/// one job at a time, leases of `expiry` seconds, a `grace` of seconds.
fn flags<'a>(workers: &'a str, expiry: &'a str, grace: &'a str) -> [&'a str; 8] {
    [
        "--workers",
        workers,
        "--concurrency",
        "1",
        "--expiry",
        expiry,
        "--grace",
        grace,
    ]
}

/// One job on a server of the test's own, doing `action` for `millis` on
/// its first attempt, run by a supervisor with one worker and the given
/// `--expiry` and `--grace`; returns once it runs.
async fn one_job(
    url: &str,
    (action, millis): (Action, u64),
    expiry: &str,
    grace: &str,
) -> (FirstRuns, Supervisor) {
    FirstRuns::running(url, "stop", (action, millis), 1, &flags("1", expiry, grace)).await
}

/// `stopped` must exit 0, and a new supervisor must run the job again to
/// success within two minutes (its lease is ten minutes; a busy machine
/// needs the margin), never two runs at once.
async fn exits_then_runs_again(job: FirstRuns, stopped: &mut Supervisor) {
    let status = stopped.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{}", stopped.log());
    job.run_again(stopped, RUN_AGAIN).await;
}

/// Waits until the supervisor's worker has exited (or was killed).
fn wait_for_no_worker(sup: &Supervisor) {
    wait_for_blocking("the worker to exit", Duration::from_secs(60), || {
        sup.worker_pids().is_empty().then_some(())
    });
}

/// Stops a supervisor (SIGTERM, `--grace grace`) while its Redis server
/// restarts: the server stops (refusing connections) as the stop begins
/// and is back, with its data (AOF), `back` later (`None`: once the
/// worker has exited). The job, whose handler does
/// `action` for `millis` on its first attempt, must have been given back
/// once the server answered: its lease would hold it past the test's
/// wait.
async fn stop_while_the_server_restarts(action: Action, millis: u64, grace: &str, back: Option<Duration>) {
    let mut server = RedisServer::start(ServerOptions {
        appendonly: true,
        ..ServerOptions::default()
    })
    .expect("start a private redis-server");
    let (job, mut sup) = one_job(&server.url(), (action, millis), LONG_LEASE_S, grace).await;
    server.stop().unwrap();
    sup.signal(libc::SIGTERM);
    match back {
        Some(back) => std::thread::sleep(back),
        None => wait_for_no_worker(&sup),
    }
    server.restart().unwrap();
    exits_then_runs_again(job, &mut sup).await;
}

/// The worker's handler never yields (for 15 s): the worker gives it up
/// at the grace's end (its process ends it), its give-back is refused at
/// once and it exits with status 75; the supervisor gives the job back
/// (not counted: the second run spins its 15 s too) once the server is
/// back, right after the worker's exit: it tries until the stop's
/// deadline, the grace + 5 s (3 s after the exit).
#[tokio::test(flavor = "multi_thread")]
async fn a_supervisor_stopped_while_the_server_restarts_gives_the_lease_back_once_it_answers() {
    stop_while_the_server_restarts(Action::Spin, 15_000, GRACE_S, None).await;
}

/// The worker stops its handler at the grace's end (3 s) and gives its
/// job back itself (not counted: the second run sleeps its 10 s too): its
/// call waits for the server, back after 3.5 s.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_stopped_while_the_server_restarts_gives_its_job_back_once_it_answers() {
    stop_while_the_server_restarts(Action::Sleep, 10_000, "3", Some(Duration::from_millis(3500))).await;
}

/// A supervisor stopped while the Redis server takes no writes (a master
/// turned replica, as in a failover): the worker's give-back is refused at
/// once (its handler stopped at the grace's end) and it exits with status
/// 75; the supervisor gives the job back itself once the server takes
/// writes again (right after the worker's exit, before the stop's
/// deadline), counting nothing: the job runs again at once, well before
/// its lease would run out, its attempts not used (the second run sleeps
/// its 10 s too).
#[tokio::test(flavor = "multi_thread")]
async fn a_job_its_worker_cannot_give_back_at_a_stop_is_given_back_by_the_supervisor() {
    let server = private_redis();
    let (job, mut sup) = one_job(&server.url(), (Action::Sleep, 10_000), LONG_LEASE_S, "3").await;
    let mut admin = read_only(&server.url()).await;
    sup.signal(libc::SIGTERM);
    wait_for_no_worker(&sup);
    take_writes(&mut admin).await;
    let status = sup.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{}", sup.log());
    let shown = job.shown().await;
    assert_eq!(
        (shown[0].state, shown[0].owner.as_deref(), shown[0].attempts),
        (JobState::Ready, None, 0),
        "{:?}\n{}",
        shown[0],
        sup.log()
    );
    job.run_again(&sup, RUN_AGAIN).await;
}

/// A worker restarted (HUP) while the Redis server takes no writes: it
/// drains, its give-back is refused and it exits with status 75; the
/// supervisor forks its successor at once and, the stop of no deadline,
/// keeps trying to give the job back until the server takes writes
/// again (after the exit): the job then runs in the new worker, within
/// two minutes though its lease is ten minutes, its attempt not counted.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_its_restarted_worker_cannot_give_back_is_given_back_once_the_server_takes_writes() {
    let server = private_redis();
    let (mut job, mut sup) = one_job(&server.url(), (Action::Sleep, 10_000), LONG_LEASE_S, GRACE_S).await;
    let old = sup.worker_pids();
    let mut admin = read_only(&server.url()).await;
    sup.signal(libc::SIGHUP);
    wait_for_blocking("the worker to be replaced", Duration::from_secs(60), || {
        let now = sup.worker_pids();
        (!now.is_empty() && now != old).then_some(())
    });
    take_writes(&mut admin).await;
    wait_for_runs(&sup, "the job to run again", RUN_AGAIN, &mut job.runs, |r| {
        r.ok_jobs() == 1
    })
    .await;
    let shown = job.shown().await;
    assert_eq!(shown[0].attempts, 0, "{:?}\n{}", shown[0], sup.log());
    sup.stop_cleanly(Duration::from_secs(60));
}

/// `jobworker --workers 0` (no supervisor) stopped while the server takes
/// no writes: nobody can give the job back, so the worker says so and
/// exits 0 (not the forked worker's 75); the job runs again once its lease
/// (10 s here) has run out.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_alone_that_cannot_give_its_job_back_exits_0_and_the_job_runs_after_its_lease() {
    let server = private_redis();
    let args = flags("0", "10", GRACE_S);
    let (job, mut alone) =
        FirstRuns::running(&server.url(), "alone", (Action::Sleep, 600_000), 1, &args).await;
    let mut admin = read_only(&server.url()).await;
    alone.signal(libc::SIGTERM);
    let status = alone.wait_exit(Duration::from_secs(60));
    take_writes(&mut admin).await;
    assert_eq!(status.code(), Some(0), "{}", alone.log());
    assert!(alone.log().contains("leases not given back"), "{}", alone.log());
    job.run_again(&alone, RUN_AGAIN).await;
}

/// Makes the server at `url` a replica of a master nobody runs: it keeps
/// its data and takes no writes (as an old master in a failover). Returns
/// the connection that did it.
async fn read_only(url: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let replica: redis::RedisResult<()> = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(1)
        .query_async(&mut admin)
        .await;
    replica.unwrap();
    admin
}

/// Makes the server a master again: it takes writes.
async fn take_writes(admin: &mut redis::aio::MultiplexedConnection) {
    let master: redis::RedisResult<()> = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query_async(admin)
        .await;
    master.unwrap();
}
