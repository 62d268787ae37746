//! The worker runtime end to end: the real `jobworker` binary (supervisor
//! and forked workers) against a real Redis, driven with real signals. The
//! scripted handler of `jobworker-examples` does what each job says and
//! records its runs in Redis.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::*;
use jobworker::redis::RedisBoard;
use jobworker::{Board, JobId, JobState, ListFilter, Page};
use jobworker_examples::scripted::{Action, Script};
use jobworker_tests::{unique_queue, wait_until};
use redis::AsyncCommands;

#[tokio::test(flavor = "multi_thread")]
async fn two_thousand_jobs_over_two_queues_run_exactly_once() {
    let _serial = serial().await;
    let board = board().await;
    let (q1, q2) = (unique_queue("e2e-a"), unique_queue("e2e-b"));
    let key = format!("runs:{q1}");
    let ok = script(Action::Ok, 0, &key);
    for q in [&q1, &q2] {
        for _ in 0..1000 {
            post(&board, q, &ok, 5).await;
        }
    }
    let mut sup = Supervisor::start(&format!("{q1},{q2}"), &["--workers", "2", "--concurrency", "4"]);
    wait_until("2,000 jobs consumed", Duration::from_secs(120), || async {
        board.job_count(&q1).await.unwrap() + board.job_count(&q2).await.unwrap() == 0
    })
    .await;
    sup.signal(libc::SIGTERM);
    assert!(sup.wait_exit(Duration::from_secs(30)).success(), "{}", sup.log());
    let runs = runs(&board, &key).await;
    assert_eq!(runs.len(), 2000, "every job ran");
    assert!(
        runs.values().all(|&n| n == 1),
        "a job ran more than once: {:?}",
        runs.iter().find(|(_, &n)| n != 1)
    );
    for q in [&q1, &q2] {
        assert!(board
            .list(q, ListFilter::State(JobState::Claimed), Page::default())
            .await
            .unwrap()
            .is_empty());
        let done = board
            .list(
                q,
                ListFilter::State(JobState::Completed),
                Page {
                    offset: 0,
                    limit: 2000,
                },
            )
            .await
            .unwrap();
        assert_eq!(done.len(), 1000);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_worker_job_is_reclaimed_at_once_and_slot_respawned() {
    let (_serial, board, q, key) = setup("e2e-kill").await;
    let id = post(&board, &q, &script(Action::Sleep, 3000, &key), 5).await;
    let mut sup = Supervisor::start(&q, &["--workers", "2", "--expiry", "60"]);
    wait_state(&board, &q, &id, JobState::Claimed, 20).await;
    // Killed once its handler has started (and counted its run), so that
    // the run after the recovery is the second.
    wait_until("the handler to start", Duration::from_secs(20), || async {
        runs(&board, &key).await.get(id.as_str()) == Some(&1)
    })
    .await;
    let owner = board.find_owner(&q, &id).await.unwrap().unwrap();
    let victim = worker_pid(&owner);
    // SAFETY: kill -9 of one of the supervisor's worker processes.
    assert_eq!(unsafe { libc::kill(victim, libc::SIGKILL) }, 0);
    let killed = Instant::now();
    wait_until("the job to be given back", Duration::from_secs(20), || async {
        board.find_owner(&q, &id).await.unwrap().as_deref() != Some(owner.as_str())
    })
    .await;
    // At once, not at the lease's expiry (60 s): the bound leaves a slow,
    // busy machine room.
    let back = killed.elapsed();
    assert!(
        back < Duration::from_secs(15),
        "the job came back after {back:?}, not at once"
    );
    wait_state(&board, &q, &id, JobState::Completed, 20).await;
    let info = board.show(&q, &id).await.unwrap();
    assert_eq!(info.attempts, 1, "the crash counts one attempt");
    assert_eq!(runs(&board, &key).await[id.as_str()], 2);
    wait_until("the slot to be respawned", Duration::from_secs(10), || async {
        let live = jobworker::board::Presence::live_workers(&board).await.unwrap();
        let mine: Vec<_> = live.iter().filter(|w| w.queues == [q.clone()]).collect();
        mine.len() == 2 && mine.iter().all(|w| w.pid as i32 != victim)
    })
    .await;
    assert!(sup.alive());
    assert!(sup.log().contains("killed by signal 9"), "{}", sup.log());
}

#[tokio::test(flavor = "multi_thread")]
async fn cpu_bound_handler_keeps_its_lease_for_three_expiries() {
    let (_serial, board, q, key) = setup("e2e-cpu").await;
    let id = post(&board, &q, &script(Action::Spin, 6000, &key), 5).await;
    let _sup = Supervisor::start(&q, &["--workers", "2", "--expiry", "2"]);
    wait_state(&board, &q, &id, JobState::Completed, 40).await;
    let info = board.show(&q, &id).await.unwrap();
    assert_eq!(
        (info.token, info.attempts),
        (1, 0),
        "claimed once, never lost: {info:?}"
    );
    assert_eq!(runs(&board, &key).await[id.as_str()], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn handler_past_its_timeout_is_stopped_retried_then_trashed() {
    let (_serial, board, q, key) = setup("e2e-timeout").await;
    let id = post(&board, &q, &script(Action::Spin, 600_000, &key), 2).await;
    let mut sup = Supervisor::start(&q, &["--workers", "1", "--timeout", "1"]);
    wait_state(&board, &q, &id, JobState::Trashed, 60).await;
    let info = board.show(&q, &id).await.unwrap();
    let reason = info.reason.clone().unwrap_or_default();
    assert!(reason.contains("timed out after 1s"), "{reason}");
    // Seen: a handler that would not stop landed in the `error` group.
    assert_eq!(info.group.as_deref(), Some("timeout"), "{info:?}");
    assert_eq!(info.attempts, 2);
    assert_eq!(
        runs(&board, &key).await[id.as_str()],
        2,
        "retried once, then trashed"
    );
    assert!(
        sup.alive(),
        "the supervisor replaces the stuck worker and keeps running"
    );
}

async fn post_sleepers(board: &RedisBoard, q: &str, n: usize, millis: u64, key: &str) -> Vec<JobId> {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(post(board, q, &script(Action::Sleep, millis, key), 5).await);
    }
    ids
}

/// Waits until 20 jobs run, sends SIGTERM to the supervisor and expects
/// it to exit 0 within `secs` seconds.
async fn term_with_20_in_flight(board: &RedisBoard, key: &str, sup: &mut Supervisor, secs: u64) {
    wait_until("20 jobs in flight", Duration::from_secs(20), || async {
        runs(board, key).await.len() == 20
    })
    .await;
    sup.stop_cleanly(Duration::from_secs(secs));
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_with_enough_grace_finishes_every_job() {
    let (_serial, board, q, key) = setup("e2e-drain").await;
    let ids = post_sleepers(&board, &q, 20, 1500, &key).await;
    let mut sup = Supervisor::start(&q, &["--workers", "2", "--concurrency", "10", "--grace", "30"]);
    term_with_20_in_flight(&board, &key, &mut sup, 30).await;
    for id in &ids {
        assert_eq!(state(&board, &q, id).await, JobState::Completed);
    }
    assert!(runs(&board, &key).await.values().all(|&n| n == 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_with_short_grace_gives_the_rest_back() {
    let (_serial, board, q, key) = setup("e2e-short").await;
    let ids: HashSet<JobId> = post_sleepers(&board, &q, 20, 60_000, &key)
        .await
        .into_iter()
        .collect();
    let mut sup = Supervisor::start(&q, &["--workers", "2", "--concurrency", "10", "--grace", "1"]);
    term_with_20_in_flight(&board, &key, &mut sup, 15).await;
    // Nothing lost, nothing counted, and claimable at once.
    assert_eq!(board.job_count(&q).await.unwrap(), 20);
    let again = claim_uncounted(&board, &q, 50).await;
    assert_eq!(again, ids);
}

#[tokio::test(flavor = "multi_thread")]
async fn sandboxes_are_private_emptied_and_never_shared() {
    let _serial = serial().await;
    let board = board().await;
    let q = unique_queue("e2e-sandbox");
    let key = format!("sandbox:{q}");
    for _ in 0..40 {
        let s = Script {
            action: Action::Sleep,
            millis: 20,
            until_attempt: 0,
            count_key: None,
            sandbox_key: Some(key.clone()),
            thread_key: None,
            next_queue: None,
            log_file: None,
        };
        post(&board, &q, &s, 5).await;
    }
    let sup = Supervisor::start(&q, &["--workers", "2", "--concurrency", "2"]);
    wait_until("40 jobs done", Duration::from_secs(60), || async {
        board.job_count(&q).await.unwrap() == 0
    })
    .await;
    let seen: HashMap<String, String> = board.connection().hgetall(&key).await.unwrap();
    assert_eq!(seen.len(), 40);
    let mut root_of_pid: HashMap<String, HashSet<String>> = HashMap::new();
    for record in seen.values() {
        let [pid, dir, entries] = record.split('|').collect::<Vec<_>>()[..] else {
            panic!("{record}")
        };
        assert_eq!(
            entries, "0",
            "a job found files left by the job before it in {dir}"
        );
        let root = dir.rsplit_once("/slot-").map(|(r, _)| r).unwrap_or(dir);
        root_of_pid
            .entry(pid.to_owned())
            .or_default()
            .insert(root.to_owned());
        let meta = std::fs::metadata(dir).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
            0o700,
            "{dir}"
        );
        assert!(
            dir.starts_with(sup.workdir.join("jobworker-workers").to_str().unwrap()),
            "{dir}"
        );
    }
    let roots: Vec<&String> = root_of_pid.values().flatten().collect();
    assert!(
        root_of_pid.values().all(|r| r.len() == 1),
        "a worker used two sandboxes: {root_of_pid:?}"
    );
    assert_eq!(
        roots.len(),
        roots.iter().collect::<HashSet<_>>().len(),
        "two workers shared a sandbox: {root_of_pid:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn aborting_handler_is_trashed_after_three_crashes() {
    let (_serial, board, q, key) = setup("e2e-abort").await;
    let id = post(&board, &q, &script(Action::Abort, 0, &key), 10).await;
    let mut sup = Supervisor::start(&q, &["--workers", "1"]);
    wait_state(&board, &q, &id, JobState::Trashed, 30).await;
    let reason = board.show(&q, &id).await.unwrap().reason.unwrap_or_default();
    assert!(
        reason.contains("poison pill") && reason.contains("SIGABRT"),
        "{reason}"
    );
    assert_eq!(runs(&board, &key).await[id.as_str()], 3);
    assert!(sup.alive(), "the supervisor keeps running");
    let after = post(&board, &q, &script(Action::Ok, 0, &key), 5).await;
    wait_state(&board, &q, &after, JobState::Completed, 20).await;
    sup.signal(libc::SIGTERM);
    assert_eq!(sup.wait_exit(Duration::from_secs(20)).code(), Some(0));
}

#[tokio::test(flavor = "multi_thread")]
async fn in_process_worker_with_workers_zero() {
    let (_serial, board, q, key) = setup("e2e-inproc").await;
    for _ in 0..5 {
        post(&board, &q, &script(Action::Ok, 0, &key), 5).await;
    }
    let mut sup = Supervisor::start(&q, &["--workers", "0", "--concurrency", "2"]);
    wait_until("5 jobs done", Duration::from_secs(20), || async {
        board.job_count(&q).await.unwrap() == 0
    })
    .await;
    sup.stop_cleanly(Duration::from_secs(20));
    assert_eq!(runs(&board, &key).await.len(), 5);
}

/// Seen: `--workers 0 --until-drained` never exited once the queue was
/// empty (`--workers 1` did). Now the in-process worker exits 0 once its
/// queues are drained.
#[tokio::test(flavor = "multi_thread")]
async fn in_process_worker_exits_when_drained() {
    let (_serial, board, q, key) = setup("e2e-inproc-drain").await;
    for _ in 0..3 {
        post(&board, &q, &script(Action::Sleep, 50, &key), 5).await;
    }
    let mut sup = Supervisor::start(&q, &["--workers", "0", "--until-drained"]);
    let status = sup.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(0), "{}", sup.log());
    assert_eq!(runs(&board, &key).await.len(), 3, "every job ran first");
    assert_eq!(board.job_count(&q).await.unwrap(), 0);
}

async fn live_workers(board: &RedisBoard, q: &str) -> Vec<jobworker::board::WorkerInfo> {
    let all = jobworker::board::Presence::live_workers(board).await.unwrap();
    all.into_iter().filter(|w| w.queues == [q.to_owned()]).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn tstp_quiets_and_cont_resumes() {
    let (_serial, board, q, key) = setup("e2e-quiet").await;
    let sup = Supervisor::start(&q, &["--workers", "1"]);
    wait_until("the worker to start", Duration::from_secs(10), || async {
        live_workers(&board, &q).await.len() == 1
    })
    .await;
    sup.signal(libc::SIGTSTP);
    wait_until(
        "the worker to say it is quiet",
        Duration::from_secs(10),
        || async { sup.log().contains("quiet: not claiming new jobs") },
    )
    .await;
    let id = post(&board, &q, &script(Action::Ok, 0, &key), 5).await;
    // Kept: what is tested is that time passes without a claim.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        state(&board, &q, &id).await,
        JobState::Ready,
        "a quiet worker claims nothing"
    );
    sup.signal(libc::SIGCONT);
    wait_state(&board, &q, &id, JobState::Completed, 10).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ttin_ttou_and_hup_change_and_restart_workers() {
    let _serial = serial().await;
    let board = board().await;
    let q = unique_queue("e2e-scale");
    let mut sup = Supervisor::start(&q, &["--workers", "1", "--grace", "5"]);
    wait_until("one worker", Duration::from_secs(10), || async {
        live_workers(&board, &q).await.len() == 1
    })
    .await;
    sup.signal(libc::SIGTTIN);
    wait_until("two workers after TTIN", Duration::from_secs(10), || async {
        live_workers(&board, &q).await.len() == 2
    })
    .await;
    sup.signal(libc::SIGTTOU);
    wait_until("one worker after TTOU", Duration::from_secs(10), || async {
        live_workers(&board, &q).await.len() == 1
    })
    .await;
    let before = live_workers(&board, &q).await[0].pid;
    sup.signal(libc::SIGHUP);
    wait_until("a fresh worker after HUP", Duration::from_secs(15), || async {
        let live = live_workers(&board, &q).await;
        live.len() == 1 && live[0].pid != before
    })
    .await;
    sup.stop_cleanly(Duration::from_secs(20));
    assert!(
        live_workers(&board, &q).await.is_empty(),
        "workers remove their entries on exit"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poison_pill_does_not_take_its_neighbours_down() {
    let (_serial, board, q, key) = setup("e2e-neighbours").await;
    let pill = post(&board, &q, &script(Action::Abort, 0, &key), 10).await;
    let mut innocents = Vec::new();
    for _ in 0..6 {
        innocents.push(post(&board, &q, &script(Action::Sleep, 300, &key), 3).await);
    }
    let _sup = Supervisor::start(&q, &["--workers", "1", "--concurrency", "4"]);
    wait_until(
        "the pill trashed and the rest done",
        Duration::from_secs(60),
        || async { board.job_count(&q).await.unwrap() == 0 },
    )
    .await;
    let reason = board.show(&q, &pill).await.unwrap().reason.unwrap_or_default();
    assert!(reason.contains("poison pill"), "{reason}");
    for id in &innocents {
        assert_eq!(
            state(&board, &q, id).await,
            JobState::Completed,
            "an innocent job was trashed"
        );
    }
}

/// Panics are caught and recorded like errors; errors are retried with
/// backoff and succeed later; fatal errors trash at once.
#[tokio::test(flavor = "multi_thread")]
async fn panics_errors_and_fatal_errors_settle_as_documented() {
    let (_serial, board, q, key) = setup("e2e-outcomes").await;
    let panics = post(&board, &q, &script(Action::Panic, 0, &key), 2).await;
    let fatal = post(&board, &q, &script(Action::Fatal, 0, &key), 5).await;
    let mut flaky = script(Action::Retry, 0, &key);
    flaky.until_attempt = 1;
    let flaky = post(&board, &q, &flaky, 5).await;
    let _sup = Supervisor::start(&q, &["--workers", "1", "--concurrency", "3"]);
    wait_state(&board, &q, &panics, JobState::Trashed, 30).await;
    wait_state(&board, &q, &fatal, JobState::Trashed, 30).await;
    wait_state(&board, &q, &flaky, JobState::Completed, 30).await;
    let reason = |id: JobId| {
        let board = board.clone();
        let q = q.clone();
        async move { board.show(&q, &id).await.unwrap().reason.unwrap_or_default() }
    };
    let r = reason(panics.clone()).await;
    assert!(
        r.contains("panicked: scripted panic on attempt 2") && r.contains("exhausted"),
        "{r}"
    );
    assert_eq!(reason(fatal.clone()).await, "fatal: scripted fatal error");
    let groups: Vec<(String, u64)> = board
        .failed(&q)
        .await
        .unwrap()
        .into_iter()
        .map(|g| (g.group, g.count))
        .collect();
    assert_eq!(groups.len(), 2, "{groups:?}");
    assert!(
        groups.contains(&("fatal".into(), 1)) && groups.contains(&("panicked".into(), 1)),
        "{groups:?}"
    );
    let runs = runs(&board, &key).await;
    assert_eq!(
        (runs[panics.as_str()], runs[fatal.as_str()], runs[flaky.as_str()]),
        (2, 1, 2)
    );
}
