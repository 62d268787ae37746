//! The supervisor on ZooKeeper through its agent (the forked helper that
//! reaches the board for it): `--until-drained` and `--progress`, a dead
//! worker's claim given back at once even when no worker is forked in its
//! place, and a poison pill trashed after three crashes (also when first
//! claimed with other jobs, through suspects). The real
//! `jobworker --zookeeper …` binary against a real ZooKeeper.

mod common;

use std::path::Path;
use std::time::Duration;

use common::cli::{jobworker_command, output_of};
use common::runs::logged;
use common::zookeeper::{board, fresh_root};
use common::{serial, Supervisor};
use jobworker::board::Maintenance;
use jobworker::zookeeper::ZooKeeperBoard;
use jobworker::{Board, JobId, JobState, NewJob};
use jobworker_examples::scripted::run_log::RunLine;
use jobworker_examples::scripted::{Action, Script};
use jobworker_tests::{unique_queue, wait_for, wait_until};

async fn post(board: &ZooKeeperBoard, q: &str, s: &Script, max_attempts: u32) -> JobId {
    let job = NewJob::new("scripted")
        .args(s)
        .unwrap()
        .max_attempts(max_attempts);
    board.post(q, job).await.unwrap()
}

/// How many runs of job `id` started, from the run log.
fn starts(log: &Path, id: &JobId) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| matches!(RunLine::parse(l), Some(RunLine::Start { id: ref i, .. }) if i == id.as_str()))
        .count()
}

/// Waits until job `pill` is trashed as a poison pill killed by SIGABRT.
async fn trashed_as_poison_pill(sup: &Supervisor, board: &ZooKeeperBoard, q: &str, pill: &JobId) {
    let info = wait_for(
        sup.and_log("the pill trashed"),
        Duration::from_secs(120),
        || async {
            let info = board.show(q, pill).await.unwrap();
            (info.state == JobState::Trashed).then_some(info)
        },
    )
    .await;
    let reason = info.reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("poison pill: killed its worker 3 times") && reason.contains("SIGABRT"),
        "{reason}"
    );
    assert_eq!(info.group.as_deref(), Some("poison-pill"), "{info:?}");
}

/// `--until-drained` (with `--progress`) on ZooKeeper: the supervisor
/// exits 0 once every job ran, and stays single-threaded.
#[tokio::test(flavor = "multi_thread")]
async fn until_drained_exits_once_the_queues_are_empty() {
    let _serial = serial().await;
    let connect = fresh_root("zk-drained");
    let board = board(&connect).await;
    let q = unique_queue("zk-drained");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(post(&board, &q, &logged(Action::Sleep, 20, &log), 3).await);
    }
    let mut sup = Supervisor::start_on(
        &["--zookeeper", &connect],
        &q,
        &["--workers", "2", "--until-drained", "--progress"],
        None,
    );
    let status = sup.wait_exit(Duration::from_secs(120));
    assert_eq!(status.code(), Some(0), "{}", sup.log());
    for id in &ids {
        assert_eq!(board.state(&q, id).await.unwrap(), JobState::Completed, "{id}");
        assert_eq!(starts(&log, id), 1, "job {id} ran other than once");
    }
    assert_eq!(board.job_count(&q).await.unwrap(), 0);
    // The workers closed their sessions on the way out: their ephemeral
    // znodes went with them, not a session timeout later.
    assert_eq!(
        board.leader(&q).await.unwrap(),
        None,
        "the queue's maintenance is still led by an exited worker"
    );
}

/// A worker killed while it holds a claim, after `TTOU` retired its slot:
/// no worker is forked in its place, and still its claim comes back at
/// once (not at the 120 s lease's end), blamed on the crash.
#[tokio::test(flavor = "multi_thread")]
async fn a_dead_worker_s_claim_comes_back_at_once_when_no_worker_replaces_it() {
    let _serial = serial().await;
    let connect = fresh_root("zk-retired");
    let board = board(&connect).await;
    let q = unique_queue("zk-retired");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let sleeper = logged(Action::Sleep, 600_000, &log);
    let jobs = [
        post(&board, &q, &sleeper, 5).await,
        post(&board, &q, &sleeper, 5).await,
    ];
    let sup = Supervisor::start_on(
        &["--zookeeper", &connect],
        &q,
        &[
            "--workers",
            "2",
            "--concurrency",
            "1",
            "--prefetch",
            "0",
            "--expiry",
            "120",
            "--grace",
            "300",
        ],
        None,
    );
    // Each worker holds one job; find the one worker 1 (the newest) holds.
    let (held, pid) = wait_for(
        sup.and_log("both jobs claimed, one by worker 1"),
        Duration::from_secs(60),
        || async {
            for id in &jobs {
                let owner = board.find_owner(&q, id).await.unwrap().unwrap_or_default();
                if owner.contains(":w1:") {
                    let pid: i32 = owner.rsplit(':').next()?.parse().ok()?;
                    return Some((id.clone(), pid));
                }
            }
            None
        },
    )
    .await;
    // Running, not only claimed: a draining worker gives back the jobs it
    // has not started (seen in CI: the job came back uncounted).
    wait_until(
        sup.and_log("worker 1 to run its job"),
        Duration::from_secs(60),
        || async { starts(&log, &held) == 1 },
    )
    .await;
    sup.signal(libc::SIGTTOU);
    wait_until(
        sup.and_log("worker 1 to be draining"),
        Duration::from_secs(30),
        || async { sup.log().contains("one worker less") },
    )
    .await;
    // SAFETY: sending SIGKILL to a worker of our own supervisor by its pid.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let info = wait_for(
        sup.and_log("the dead worker's job back to ready"),
        Duration::from_secs(30),
        || async {
            let info = board.show(&q, &held).await.unwrap();
            (info.state == JobState::Ready).then_some(info)
        },
    )
    .await;
    assert_eq!(info.attempts, 1, "{info:?}");
    let reason = info.reason.unwrap_or_default();
    assert!(reason.starts_with("crashed: worker"), "{reason}");
    assert_eq!(sup.worker_pids().len(), 1, "the retired slot stays empty");
    assert!(sup.agent_pid().is_some(), "the supervisor's agent gave it back");
}

/// A job that kills its worker every time is trashed as a poison pill at
/// the third crash, long before its 10 attempts are used up; the
/// supervisor keeps running and the next job completes.
#[tokio::test(flavor = "multi_thread")]
async fn an_aborting_handler_is_trashed_as_a_poison_pill_after_three_crashes() {
    let _serial = serial().await;
    let connect = fresh_root("zk-poison");
    let board = board(&connect).await;
    let q = unique_queue("zk-poison");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let pill = post(&board, &q, &logged(Action::Abort, 0, &log), 10).await;
    let mut sup = Supervisor::start_on(&["--zookeeper", &connect], &q, &["--workers", "1"], None);
    trashed_as_poison_pill(&sup, &board, &q, &pill).await;
    assert_eq!(starts(&log, &pill), 3);
    let after = post(&board, &q, &logged(Action::Ok, 0, &log), 3).await;
    wait_until(
        sup.and_log("the next job done"),
        Duration::from_secs(60),
        || async { board.state(&q, &after).await.unwrap() == JobState::Completed },
    )
    .await;
    sup.signal(libc::SIGTERM);
    assert_eq!(
        sup.wait_exit(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        sup.log()
    );
}

/// A poison pill claimed together with other jobs: its first crash kills
/// a worker holding three jobs, which blames none and makes all three
/// suspects; each then runs alone, so the pill's next three crashes are
/// its own and it is trashed as a poison pill, while the others complete.
#[tokio::test(flavor = "multi_thread")]
async fn a_poison_pill_claimed_with_other_jobs_is_found_through_suspects() {
    let _serial = serial().await;
    let connect = fresh_root("zk-suspects");
    let board = board(&connect).await;
    let q = unique_queue("zk-suspects");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let pill = post(&board, &q, &logged(Action::Abort, 0, &log), 10).await;
    let mut fine = Vec::new();
    for _ in 0..2 {
        fine.push(post(&board, &q, &logged(Action::Sleep, 500, &log), 10).await);
    }
    let args = ["--workers", "1", "--concurrency", "3"];
    let mut sup = Supervisor::start_on(&["--zookeeper", &connect], &q, &args, None);
    trashed_as_poison_pill(&sup, &board, &q, &pill).await;
    assert_eq!(starts(&log, &pill), 4, "one shared crash, then three alone");
    for id in &fine {
        wait_until(
            sup.and_log("the others complete"),
            Duration::from_secs(60),
            || async { board.state(&q, id).await.unwrap() == JobState::Completed },
        )
        .await;
    }
    sup.signal(libc::SIGTERM);
    assert_eq!(
        sup.wait_exit(Duration::from_secs(30)).code(),
        Some(0),
        "{}",
        sup.log()
    );
}

/// The stored `expiry` reaches the workers on ZooKeeper (the supervisor
/// reads it through its agent before it forks them): a claim is held for
/// the stored 300 s, not the built-in 30 s.
#[tokio::test(flavor = "multi_thread")]
async fn the_stored_expiry_reaches_the_workers() {
    let _serial = serial().await;
    let connect = fresh_root("zk-expiry");
    let board = board(&connect).await;
    jobworker::board::Admin::set_config(&board, "expiry", Some("300"))
        .await
        .unwrap();
    let q = unique_queue("zk-expiry");
    let dir = tempfile::tempdir().unwrap();
    let id = post(
        &board,
        &q,
        &logged(Action::Sleep, 600_000, &dir.path().join("runs.log")),
        3,
    )
    .await;
    let _sup = Supervisor::start_on(&["--zookeeper", &connect], &q, &["--workers", "1"], None);
    let expires_in = wait_for(&"the job claimed", Duration::from_secs(60), || async {
        let info = board.show(&q, &id).await.unwrap();
        info.expires_in_ms.filter(|_| info.state == JobState::Claimed)
    })
    .await;
    assert!(expires_in > 60_000, "the lease runs {expires_in} ms");
}

/// A queue limit set with `jobworker limit` holds across the supervisor's
/// workers on ZooKeeper: two workers with room for four jobs each never
/// run more than two of the queue's jobs at once (from the run log: a
/// run's start and end lie inside its claim), and every job runs once.
#[tokio::test(flavor = "multi_thread")]
async fn a_queue_limit_holds_across_the_workers() {
    let _serial = serial().await;
    let connect = fresh_root("zk-limit");
    let board = board(&connect).await;
    let q = unique_queue("zk-limit");
    let (code, _, err) =
        output_of(jobworker_command().args(["--zookeeper", &connect, "limit", "2", "-q", &q]));
    assert_eq!(code, 0, "{err}");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut ids = Vec::new();
    for _ in 0..12 {
        ids.push(post(&board, &q, &logged(Action::Sleep, 300, &log), 3).await);
    }
    let mut sup = Supervisor::start_on(
        &["--zookeeper", &connect],
        &q,
        &["--workers", "2", "--concurrency", "4", "--until-drained"],
        None,
    );
    let status = sup.wait_exit(Duration::from_secs(120));
    assert_eq!(status.code(), Some(0), "{}", sup.log());
    let mut edges = Vec::new();
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        match RunLine::parse(line) {
            Some(RunLine::Start { at_us, .. }) => edges.push((at_us, 1)),
            Some(RunLine::End { at_us, .. }) => edges.push((at_us, -1)),
            None => {}
        }
    }
    // Ends before starts at the same instant: a slot freed and taken again.
    edges.sort();
    let (mut running, mut most) = (0i64, 0i64);
    for (_, step) in edges {
        running += step;
        most = most.max(running);
    }
    assert!(most <= 2, "{most} jobs ran at once under a limit of 2");
    assert_eq!(most, 2, "the two workers should reach the limit");
    for id in &ids {
        assert_eq!(board.state(&q, id).await.unwrap(), JobState::Completed, "{id}");
        assert_eq!(starts(&log, id), 1, "job {id} ran other than once");
    }
}

/// A recurring job on ZooKeeper: two workers (so two maintenance runners
/// race for the queue's leadership) spawn its due slots and run them;
/// every run the template counts is posted once and started once.
#[tokio::test(flavor = "multi_thread")]
async fn recurring_runs_are_spawned_and_run_by_the_workers() {
    use jobworker::board::Admin;
    use jobworker::recurring::RecurringJob;
    use jobworker::schedule::Rule;
    let _serial = serial().await;
    let connect = fresh_root("zk-recur");
    let board = board(&connect).await;
    let q = unique_queue("zk-recur");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut sup = Supervisor::start_on(&["--zookeeper", &connect], &q, &["--workers", "2"], None);
    let every = Rule::every(Duration::from_millis(300)).unwrap();
    let template = RecurringJob::new("scripted", every)
        .args(&logged(Action::Ok, 0, &log))
        .unwrap()
        .backlog(100);
    let id = board.recur(&q, template).await.unwrap();
    let spawned = || async { board.recurring(&q).await.unwrap()[0].runs };
    wait_until("5 runs spawned", Duration::from_secs(60), || async {
        spawned().await >= 5
    })
    .await;
    board.unrecur(&q, &id).await.unwrap();
    let done = board.recurring(&q).await.unwrap();
    assert!(done.is_empty(), "{done:?}");
    // Every posted run completes (the workers consume what they ran).
    wait_until("the runs to be handled", Duration::from_secs(60), || async {
        board.job_count(&q).await.unwrap() == 0
    })
    .await;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let mut started: Vec<String> = text
        .lines()
        .filter_map(|l| match RunLine::parse(l) {
            Some(RunLine::Start { id, .. }) => Some(id),
            _ => None,
        })
        .collect();
    let runs = started.len();
    started.sort();
    started.dedup();
    assert_eq!(started.len(), runs, "a run started twice: {text}");
    assert!(runs >= 5, "the spawned runs ran: {text}");
    for run in &started {
        let state = board.state(&q, &JobId::from(run.as_str())).await.unwrap();
        assert_eq!(state, JobState::Completed, "{run}");
    }
    // Maintenance ran quietly: no failed election or service pass.
    let logged = sup.log();
    assert!(!logged.contains("maintenance"), "{logged}");
    sup.stop_cleanly(Duration::from_secs(60));
}
