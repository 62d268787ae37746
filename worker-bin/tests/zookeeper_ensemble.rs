//! A drain through the loss of the ZooKeeper leader, then of a majority,
//! end to end: a real 3-member ensemble on loopback ports; the real
//! `jobworker` supervisor with two workers on `--zookeeper
//! host1,host2,host3/root`; 2,000 jobs. The leader is killed (kill -9) a
//! quarter of the way, kept down while the workers go on with the other
//! two members, then started again. Then two members are killed: no quorum
//! serves for longer than the leases and the workers' sessions, as in an
//! election that takes that long on a slow, busy machine (one took 40 s in
//! CI). Every run is logged by the scripted handler outside ZooKeeper (a
//! run log file), so what the losses did shows as jobs that never ran, ran
//! again, or ran twice at once. A job may run again only when its worker
//! said that it could not record the result (its lease lapsed while no
//! quorum served): at least once, never silently twice. That holds in
//! both losses: the leader's election alone can outlast a lease on a slow
//! machine, so exactly once through a leader's loss, which an earlier
//! version asserted, is not promised.
//!
//! The test's own board asks for a 20 s session and the workers keep the
//! default 10 s one, so the sessions the members logged with a 10 s
//! timeout are the supervisor's (its workers, their heartbeats, and the
//! agent that answers the supervisor's questions).

mod common;

use std::collections::HashSet;
use std::fmt::{self, Display};
use std::path::Path;
use std::time::{Duration, Instant};

use common::runs::{logged, outcome, unrecorded};
use common::{serial, Supervisor};
use jobworker::zookeeper::{ZooKeeperBoard, ZooKeeperOptions};
use jobworker::{Board, JobId, NewJob};
use jobworker_examples::scripted::Action;
use jobworker_tests::chaos::runs::Runs;
use jobworker_tests::{unique_queue, wait_until, ZooKeeperEnsemble, ENSEMBLE_TIMEOUT};
use tokio::task::block_in_place;

/// Jobs posted and drained.
const JOBS: usize = 2_000;
/// Posted per `post_many`.
const BATCH: usize = 100;
/// How long each phase of the drain may take on a slow, busy machine.
const PHASE: Duration = Duration::from_secs(300);
/// The test's own session (the workers keep jobworker's default 10 s).
const TEST_SESSION: Duration = Duration::from_secs(20);
/// The workers' session timeout, as the members log it.
const WORKER_SESSION_MS: u64 = 10_000;
/// How long the leader stays down (unless three quarters of the jobs ran
/// before): longer than the workers' session, so a session that did not
/// move to another member would expire.
const DOWN_FOR: Duration = Duration::from_secs(12);
/// Jobs that must complete while the leader is down.
const WHILE_DOWN: usize = 100;
/// How long each job's handler sleeps: with 2 workers × [`CONCURRENCY`]
/// the drain takes half a minute or more, so that it goes on before,
/// during and after the leader's absence.
const JOB_MILLIS: u64 = 100;
/// Jobs each worker runs at once.
const CONCURRENCY: &str = "4";
/// The workers' lease, in seconds: shorter than [`MAJORITY_DOWN`], so
/// leases lapse while no quorum serves.
const EXPIRY: &str = "6";
/// How long two members stay down: longer than the lease and than the
/// workers' sessions (the client gives one up 1.4 timeouts after the last
/// reply), so sessions end and are replaced.
const MAJORITY_DOWN: Duration = Duration::from_secs(16);
/// Jobs that must complete between the leader's return and the loss of
/// the majority.
const BETWEEN: usize = 100;
/// Lines of the supervisor's log quoted when the test fails.
const TAIL: usize = 40;

/// What to show when a wait or check fails: what was awaited, then the
/// end of the supervisor's log (the ensemble prints its members' logs
/// when a panic drops it).
struct Evidence<'a>(&'a str, &'a Supervisor);

impl Display for Evidence<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let log = self.1.log();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(TAIL)..].join("\n");
        write!(f, "{}\n--- jobworker (last {TAIL} lines) ---\n{tail}", self.0)
    }
}

/// Posts [`JOBS`] jobs whose runs are logged to `log`.
async fn post_jobs(board: &ZooKeeperBoard, q: &str, log: &Path) -> Vec<JobId> {
    let script = logged(Action::Sleep, JOB_MILLIS, log);
    let job = NewJob::new("scripted").args(&script).unwrap();
    let mut ids = Vec::with_capacity(JOBS);
    for _ in 0..JOBS / BATCH {
        let posted = board.post_many(q, &vec![job.clone(); BATCH]).await.unwrap();
        ids.extend(posted.into_iter().map(|r| r.expect("a post")));
    }
    ids
}

/// Waits until `done(ok jobs)` holds, reading the run log as it grows.
async fn wait_runs(runs: &mut Runs, what: Evidence<'_>, done: impl Fn(usize) -> bool) -> usize {
    wait_until(what, PHASE, || {
        runs.poll().unwrap();
        let ok = runs.ok_jobs();
        let met = done(ok);
        async move { met }
    })
    .await;
    runs.ok_jobs()
}

/// The workers' ZooKeeper sessions as the members logged them: (distinct
/// sessions, establishments including moves to another member, sessions
/// a leader expired).
fn worker_sessions(ensemble: &ZooKeeperEnsemble) -> (usize, usize, usize) {
    let established: Vec<_> = ensemble
        .established_sessions()
        .into_iter()
        .filter(|s| s.timeout_ms == WORKER_SESSION_MS)
        .collect();
    let ids: HashSet<&str> = established.iter().map(|s| s.session.as_str()).collect();
    let expired = ensemble
        .expired_sessions()
        .into_iter()
        .filter(|s| ids.contains(s.as_str()))
        .count();
    (ids.len(), established.len(), expired)
}

/// What the leader's loss looked like.
#[derive(Debug)]
struct LeaderLoss {
    /// The member killed, and the one elected in its place.
    leader: usize,
    new_leader: usize,
    /// From the kill until the live members had a leader.
    election: Duration,
    /// Jobs done before the kill, and while the leader was down.
    at_kill: usize,
    ran_while_down: usize,
    /// How long the leader was down.
    down: Duration,
}

/// Once a quarter of the jobs ran: kills the leader, waits for the new
/// one, keeps the old one down while the workers go on (at least
/// [`WHILE_DOWN`] jobs, and [`DOWN_FOR`] unless three quarters of the jobs
/// ran first, so a quarter is left for after), then restarts it.
async fn lose_the_leader(ensemble: &mut ZooKeeperEnsemble, runs: &mut Runs, sup: &Supervisor) -> LeaderLoss {
    let quarter = Evidence("a quarter of the jobs to run", sup);
    let at_kill = wait_runs(runs, quarter, |ok| ok >= JOBS / 4).await;
    let leader = ensemble.leader();
    let killed = Instant::now();
    ensemble.kill(leader);
    let new_leader = block_in_place(|| ensemble.wait_new_leader(leader, ENSEMBLE_TIMEOUT));
    let election = killed.elapsed();
    let enough =
        |ok: usize| ok >= at_kill + WHILE_DOWN && (killed.elapsed() >= DOWN_FOR || ok >= JOBS * 3 / 4);
    let going_on = Evidence("jobs to run while the leader is down", sup);
    let at_restart = wait_runs(runs, going_on, enough).await;
    let down = killed.elapsed();
    block_in_place(|| ensemble.restart(leader));
    LeaderLoss {
        leader,
        new_leader,
        election,
        at_kill,
        ran_while_down: at_restart - at_kill,
        down,
    }
}

/// Once [`BETWEEN`] more jobs ran with the leader back: kills two members
/// (the leader among them), keeps them down for [`MAJORITY_DOWN`], then
/// starts them again. Returns the jobs done when they went down.
async fn lose_a_majority(ensemble: &mut ZooKeeperEnsemble, runs: &mut Runs, sup: &Supervisor) -> usize {
    let done = runs.ok_jobs();
    let back = Evidence("jobs to run with the leader back", sup);
    let at_kill = wait_runs(runs, back, |ok| ok >= (done + BETWEEN).min(JOBS)).await;
    let leader = ensemble.leader();
    let other = (0..ensemble.size()).find(|&i| i != leader).unwrap();
    ensemble.kill(leader);
    ensemble.kill(other);
    tokio::time::sleep(MAJORITY_DOWN).await;
    block_in_place(|| {
        ensemble.restart(leader);
        ensemble.restart(other);
    });
    at_kill
}

/// Must-show: 2,000 jobs drain on a 3-member ensemble through kill -9 of
/// its leader, then of a majority: each completes, none twice at once,
/// none again unless its worker said so; the workers go on while the
/// leader is down.
#[tokio::test(flavor = "multi_thread")]
async fn a_drain_survives_kill_9_of_the_leader_then_of_a_majority() {
    let _serial = serial().await;
    let mut ensemble = block_in_place(|| ZooKeeperEnsemble::start(3));
    let connect = ensemble.connect_string_with_chroot(&format!("/{}", unique_queue("zk-ensemble")));
    let mut opts = ZooKeeperOptions::new(&connect);
    opts.session_timeout = TEST_SESSION;
    let board = ZooKeeperBoard::connect(opts)
        .await
        .expect("connect to the ensemble");
    let q = unique_queue("zk-ensemble");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let ids = post_jobs(&board, &q, &log).await;

    let started = Instant::now();
    let mut sup = Supervisor::start_on(
        &["--zookeeper", &connect],
        &q,
        &["--workers", "2", "--concurrency", CONCURRENCY, "--expiry", EXPIRY],
        None,
    );
    let mut runs = Runs::new(&log);
    let loss = lose_the_leader(&mut ensemble, &mut runs, &sup).await;
    let at_majority_loss = lose_a_majority(&mut ensemble, &mut runs, &sup).await;
    wait_runs(&mut runs, Evidence("every job to run", &sup), |ok| ok == JOBS).await;
    let drain = started.elapsed();
    let empty = Evidence("the queue to be empty", &sup);
    wait_until(empty, PHASE, || async { board.job_count(&q).await.unwrap() == 0 }).await;
    sup.stop_cleanly(Duration::from_secs(60));
    runs.poll().unwrap();

    let out = outcome(&ids, runs.all(), &unrecorded(&sup.log()));
    let (sessions, establishments, expired) = worker_sessions(&ensemble);
    let log = sup.log();
    let new_sessions = log.matches("connecting a new one").count();
    println!(
        "ensemble drain: {JOBS} jobs of {JOB_MILLIS} ms in {drain:?} with 2 workers × {CONCURRENCY}; \
         leader {} killed after {} jobs, member {} elected in {:?}; {} jobs ran in the {:?} it was down; \
         a majority killed for {MAJORITY_DOWN:?} after {at_majority_loss} jobs; {} runs in all, {out:?}",
        loss.leader,
        loss.at_kill,
        loss.new_leader,
        loss.election,
        loss.ran_while_down,
        loss.down,
        runs.all().len(),
    );
    println!(
        "ensemble drain: workers' ZooKeeper sessions: {sessions} distinct ({establishments} establishments \
         counting moves to another member, {expired} expired by a leader); worker log lines \
         'session ended; connecting a new one': {new_sessions}"
    );
    let bad = runs.bad_lines();
    assert!(bad.is_empty(), "bad run log lines: {bad:?}");
    let evidence = Evidence("the outcome", &sup);
    let counts = (out.never_ran, out.ran_again, out.concurrent);
    assert_eq!(counts, (0, 0, 0), "{out:?}; {evidence}");
    // No reconnect storm: each ended session is announced once, however
    // many connects its replacement took while no quorum served.
    let announced: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("connecting a new one"))
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("session=")))
        .collect();
    let once: HashSet<&str> = announced.iter().copied().collect();
    assert_eq!(once.len(), announced.len(), "{announced:?}; {evidence}");
}
