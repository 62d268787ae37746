//! Hand-offs end to end: the real `jobworker` binary against a real Redis.
//! An idle worker is handed the next job posted to its queue (the post
//! takes the lease for it); a worker that is stopped, killed or quieted
//! while registered for a hand-off loses no job and runs none twice.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::*;
use jobworker::redis::RedisBoard;
use jobworker::{Board, JobId, JobInfo, JobState};
use jobworker_examples::scripted::Action;
use jobworker_tests::wait_until;
use redis::AsyncCommands;

/// Sends `sig` to worker `pid`.
fn signal(pid: i32, sig: i32) {
    // SAFETY: sending a signal to a worker of our own supervisor by its pid.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill {sig} {pid}");
}

/// The workers registered for a hand-off on `q`, and whether each listens
/// on its hand-off channel.
async fn registered(board: &RedisBoard, q: &str) -> Vec<(String, bool)> {
    let keys = board.keys(q).unwrap();
    let mut con = board.connection();
    let idle: HashMap<String, String> = con.hgetall(keys.idle()).await.unwrap();
    let mut out = Vec::new();
    for who in idle.into_keys() {
        let (_, n): (String, i64) = redis::cmd("PUBSUB")
            .arg("NUMSUB")
            .arg(keys.handoff(&who))
            .query_async::<Vec<(String, i64)>>(&mut con)
            .await
            .unwrap()
            .remove(0);
        out.push((who, n > 0));
    }
    out
}

/// Waits until one worker of `q` is idle, registered and listening;
/// returns its pid.
async fn idle_worker(sup: &Supervisor, board: &RedisBoard, q: &str) -> i32 {
    wait_until(
        sup.and_log("a worker registered for a hand-off"),
        Duration::from_secs(30),
        || async { matches!(registered(board, q).await.as_slice(), [(_, true)]) },
    )
    .await;
    worker_pid(&registered(board, q).await[0].0)
}

/// Waits (up to `secs`) for job `id` to complete, asserts that it ran
/// once, and returns what the board shows of it.
async fn completed_once(
    sup: &Supervisor,
    board: &RedisBoard,
    (q, key): (&str, &str),
    id: &JobId,
    secs: u64,
) -> JobInfo {
    wait_state(board, q, id, JobState::Completed, secs).await;
    assert_eq!(runs(board, key).await.get(id.as_str()), Some(&1), "{}", sup.log());
    board.show(q, id).await.unwrap()
}

/// True once process `pid` is stopped (state T in /proc).
fn stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|rest| rest.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

/// A worker stopped (SIGSTOP) while registered is handed a job it cannot
/// read; its lease runs out while it is stopped. Continued, the worker
/// does not start that stale hand-off (it reads it too late to trust its
/// lease, and SIGCONT gives back what was handed): the job runs once, on a
/// second lease.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_handed_to_a_stopped_worker_runs_once_after_its_lease_runs_out() {
    let (_serial, board, q, key) = setup("e2e-handoff-stop").await;
    // A long interval: the registration (two intervals) outlasts the stop.
    let mut sup = Supervisor::start(&q, &["--workers", "1", "--expiry", "1", "--interval", "60"]);
    let pid = idle_worker(&sup, &board, &q).await;
    signal(pid, libc::SIGSTOP);
    wait_until("the worker to stop", Duration::from_secs(10), || async {
        stopped(pid)
    })
    .await;
    let id = post(&board, &q, &script(Action::Ok, 0, &key), 5).await;
    // Handed over: the post took the lease for the stopped worker.
    assert_eq!(state(&board, &q, &id).await, JobState::Claimed, "{}", sup.log());
    // Well past the 1 s lease, by the server's clock.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    signal(pid, libc::SIGCONT);
    let info = completed_once(&sup, &board, (&q, &key), &id, 30).await;
    // Two leases: the stale hand-off's (which counted an attempt when it
    // ran out) and the claim that ran the job.
    assert_eq!((info.token, info.attempts), (2, 1), "{info:?}");
    sup.stop_cleanly(Duration::from_secs(30));
}

/// An idle worker runs the job a post hands it under the lease the post
/// took (token 1): it does not give it back to claim it again (seen: the
/// heartbeat counted a handed lease from half an expiry back, and the
/// worker judged every hand-off too old to start).
#[tokio::test(flavor = "multi_thread")]
async fn an_idle_worker_runs_a_handed_job_under_the_posts_lease() {
    let (_serial, board, q, key) = setup("e2e-handoff-run").await;
    let mut sup = Supervisor::start(&q, &["--workers", "1"]);
    for _ in 0..3 {
        idle_worker(&sup, &board, &q).await;
        let id = post(&board, &q, &script(Action::Ok, 0, &key), 5).await;
        wait_state(&board, &q, &id, JobState::Completed, 30).await;
        let info = board.show(&q, &id).await.unwrap();
        assert_eq!((info.token, info.attempts), (1, 0), "{info:?}\n{}", sup.log());
    }
    assert!(!sup.log().contains("given back"), "{}", sup.log());
    sup.stop_cleanly(Duration::from_secs(30));
}

/// A handed job that runs longer than its lease keeps the post's lease,
/// handed at once or a while into the worker's wait (its lease older at
/// the start): it runs once, to the end.
#[tokio::test(flavor = "multi_thread")]
async fn a_handed_job_longer_than_its_lease_keeps_it() {
    let (_serial, board, q, key) = setup("e2e-handoff-long").await;
    let expiry = 6;
    let args = ["--workers", "1", "--expiry", "6", "--interval", "60"];
    let mut sup = Supervisor::start(&q, &args);
    for wait in [0, expiry * 1000 * 2 / 5] {
        idle_worker(&sup, &board, &q).await;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        let id = post(&board, &q, &script(Action::Sleep, expiry * 1000 * 4 / 3, &key), 5).await;
        let info = completed_once(&sup, &board, (&q, &key), &id, 60).await;
        if wait == 0 {
            assert_eq!((info.token, info.attempts), (1, 0), "{info:?}\n{}", sup.log());
        }
    }
    assert!(
        !sup.log().contains("could not extend it in time"),
        "{}",
        sup.log()
    );
    sup.stop_cleanly(Duration::from_secs(30));
}

/// A worker killed (kill -9) while registered leaves a registration with
/// nobody listening: posts skip it, or hand it a lease that runs out. The
/// worker started in its place runs every job, each once.
#[tokio::test(flavor = "multi_thread")]
async fn a_killed_idle_worker_loses_no_job() {
    let (_serial, board, q, key) = setup("e2e-handoff-kill").await;
    let mut sup = Supervisor::start(&q, &["--workers", "1", "--expiry", "1"]);
    let pid = idle_worker(&sup, &board, &q).await;
    signal(pid, libc::SIGKILL);
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(post(&board, &q, &script(Action::Ok, 0, &key), 5).await);
    }
    for id in &ids {
        wait_state(&board, &q, id, JobState::Completed, 60).await;
    }
    let runs = runs(&board, &key).await;
    for id in &ids {
        assert_eq!(runs.get(id.as_str()), Some(&1), "{}", sup.log());
    }
    sup.stop_cleanly(Duration::from_secs(30));
}

/// Quieted (SIGTSTP) while registered, a worker ends its registration and
/// gives back what was handed to it: a job posted then stays ready,
/// unclaimed, and runs once the worker resumes.
#[tokio::test(flavor = "multi_thread")]
async fn a_quieted_worker_is_handed_nothing() {
    let (_serial, board, q, key) = setup("e2e-handoff-quiet").await;
    let mut sup = Supervisor::start(&q, &["--workers", "1"]);
    let pid = idle_worker(&sup, &board, &q).await;
    signal(pid, libc::SIGTSTP);
    wait_until(
        sup.and_log("the registration to end"),
        Duration::from_secs(30),
        || async { registered(&board, &q).await.is_empty() },
    )
    .await;
    let id = post(&board, &q, &script(Action::Ok, 0, &key), 5).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(state(&board, &q, &id).await, JobState::Ready, "{}", sup.log());
    signal(pid, libc::SIGCONT);
    let info = completed_once(&sup, &board, (&q, &key), &id, 30).await;
    assert_eq!(
        (info.token, info.attempts),
        (1, 0),
        "one lease, nothing handed: {info:?}"
    );
    sup.stop_cleanly(Duration::from_secs(30));
}

/// A worker with no room reads a hand-off that reaches it anyway (one sent
/// just before a claim filled it up) and gives it back at once: the job
/// does not sit unread, held, until its lease ends.
#[tokio::test(flavor = "multi_thread")]
async fn a_full_worker_gives_a_hand_off_back_at_once() {
    let (_serial, board, q, key) = setup("e2e-handoff-full").await;
    let mut sup = Supervisor::start(&q, &["--workers", "1", "--concurrency", "1", "--expiry", "30"]);
    idle_worker(&sup, &board, &q).await;
    let who = registered(&board, &q).await.remove(0).0;
    let long = post(&board, &q, &script(Action::Sleep, 60_000, &key), 3).await;
    wait_until(
        sup.and_log("the long job to start"),
        Duration::from_secs(30),
        || async { runs(&board, &key).await.contains_key(long.as_str()) },
    )
    .await;
    // As if the worker had registered just before it filled up.
    register_for_handoff(&board, &q, &who).await;
    let id = post(&board, &q, &script(Action::Ok, 0, &key), 3).await;
    wait_state(&board, &q, &id, JobState::Ready, 10).await;
    assert!(!runs(&board, &key).await.contains_key(id.as_str()));
    sup.signal(libc::SIGQUIT);
    sup.wait_exit(Duration::from_secs(30));
}
