//! Handlers whose first step runs on the worker loop's own thread
//! (`start_on_loop = true`), end to end: the real binary against a real
//! Redis. They finish, wait, fail and panic like any other handler; one
//! whose first step never yields gets its worker replaced by the
//! heartbeat's watchdog, and no job of that worker is lost.

mod common;

use common::runs::logged;
use common::*;
use jobworker::redis::RedisBoard;
use jobworker::{Board, JobId, JobState};
use jobworker_examples::scripted::run_log::RunOutcome;
use jobworker_examples::scripted::{Action, Script};
use jobworker_tests::chaos::runs::Runs;
use jobworker_tests::wait_until;
use redis::AsyncCommands;
use std::collections::HashMap;
use std::time::Duration;

const ON_LOOP: &str = "scripted-on-loop";

/// The name of the handler runtime's threads.
const HANDLER_THREAD: &str = "jobworker-handler";

#[tokio::test(flavor = "multi_thread")]
async fn handlers_starting_on_the_loop_finish_wait_and_panic_like_any_other() {
    let (_serial, board, q, key) = setup("e2e-on-loop").await;
    // Without a count key the handler is over in its first step: no task.
    let unrecorded = Script {
        count_key: None,
        ..script(Action::Ok, 0, &key)
    };
    let mut done_on_loop = Vec::new();
    for _ in 0..20 {
        done_on_loop.push(post_to(&board, &q, ON_LOOP, &unrecorded, 1).await);
    }
    // Each records the thread its first step ran on; so do plain async
    // handlers, which start on the handler runtime.
    let threads = format!("threads:{q}");
    let thread_recorded = |action, millis| Script {
        thread_key: Some(threads.clone()),
        ..script(action, millis, &key)
    };
    let mut sleepers = Vec::new();
    for _ in 0..10 {
        sleepers.push(post_to(&board, &q, ON_LOOP, &thread_recorded(Action::Sleep, 300), 1).await);
    }
    let mut on_handler_runtime = Vec::new();
    for _ in 0..5 {
        on_handler_runtime.push(post(&board, &q, &thread_recorded(Action::Ok, 0), 1).await);
    }
    let panics = post_to(&board, &q, ON_LOOP, &script(Action::Panic, 0, &key), 2).await;
    let mut sup = Supervisor::start(&q, &["--workers", "1", "--concurrency", "4"]);
    for id in done_on_loop.iter().chain(&sleepers).chain(&on_handler_runtime) {
        wait_state(&board, &q, id, JobState::Completed, 60).await;
    }
    wait_state(&board, &q, &panics, JobState::Trashed, 60).await;
    let info = board.show(&q, &panics).await.unwrap();
    let reason = info.reason.clone().unwrap_or_default();
    assert!(reason.contains("scripted panic on attempt 2"), "{reason}");
    assert_eq!(info.attempts, 2, "{info:?}");
    let runs = runs(&board, &key).await;
    for id in &sleepers {
        assert_eq!(runs.get(id.as_str()), Some(&1), "each sleeper ran once: {runs:?}");
    }
    let started_on: HashMap<String, String> = hash_of(&board, &threads).await;
    for id in &sleepers {
        let thread = &started_on[id.as_str()];
        assert_ne!(
            thread, HANDLER_THREAD,
            "an on-loop handler's first step runs on the loop"
        );
    }
    for id in &on_handler_runtime {
        assert_eq!(started_on[id.as_str()], HANDLER_THREAD, "{started_on:?}");
    }
    assert!(
        !runs.contains_key(panics.as_str()),
        "the panic came before the record"
    );
    assert!(sup.alive(), "{}", sup.log());
    assert!(
        !sup.log().contains("replacing the worker"),
        "a panic in the first step is the job's, not the worker's: {}",
        sup.log()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_first_step_that_never_yields_gets_its_worker_replaced_and_nothing_is_lost() {
    let (_serial, board, q, key) = setup("e2e-on-loop-stuck").await;
    let mut innocent: Vec<JobId> = Vec::new();
    for _ in 0..6 {
        innocent.push(post(&board, &q, &script(Action::Sleep, 400, &key), 5).await);
    }
    let spinner = post_to(&board, &q, ON_LOOP, &script(Action::Spin, 600_000, &key), 2).await;
    for _ in 0..6 {
        innocent.push(post(&board, &q, &script(Action::Sleep, 400, &key), 5).await);
    }
    let mut sup = Supervisor::start(&q, &["--workers", "1", "--concurrency", "3", "--timeout", "1"]);
    wait_state(&board, &q, &spinner, JobState::Trashed, 90).await;
    let info = board.show(&q, &spinner).await.unwrap();
    let reason = info.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("timed out after 1s in its first step on the worker loop"),
        "{reason}"
    );
    assert_eq!(info.group.as_deref(), Some("timeout"), "{info:?}");
    assert_eq!(info.attempts, 2, "retried once, then trashed: {info:?}");
    for id in &innocent {
        wait_state(&board, &q, id, JobState::Completed, 60).await;
    }
    assert!(
        sup.alive(),
        "the supervisor replaces the worker and runs on: {}",
        sup.log()
    );
}

/// The workers registered for a hand-off on `queue`.
async fn registered(board: &RedisBoard, queue: &str) -> Vec<String> {
    let mut con = board.connection();
    let idle: HashMap<String, String> = con.hgetall(board.keys(queue).unwrap().idle()).await.unwrap();
    idle.into_keys().collect()
}

/// Waits until `sup`'s worker is idle, registered for a hand-off on
/// `queue`; returns its owner string.
async fn idle_worker(sup: &Supervisor, board: &RedisBoard, queue: &str) -> String {
    wait_until(
        sup.and_log("the worker to register for a hand-off"),
        Duration::from_secs(30),
        || async { !registered(board, queue).await.is_empty() },
    )
    .await;
    registered(board, queue).await.remove(0)
}

/// Waits until the run log read by `runs` has the start line of `id`'s
/// run (`what` names it).
async fn wait_started(sup: &Supervisor, runs: &mut Runs, id: &JobId, what: &str) {
    wait_until(sup.and_log(what), Duration::from_secs(30), || {
        runs.poll().unwrap();
        let started = runs.all().iter().any(|r| r.id == id.as_str());
        async move { started }
    })
    .await;
}

/// A job that a post hands to a worker whose loop is frozen is never read
/// by that worker. When the watchdog replaces the worker, the job goes
/// back without an attempt or a crash counted (it did nothing), and the
/// next worker runs it.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_handed_to_a_frozen_loop_goes_back_without_an_attempt() {
    let (_serial, board, q, key) = setup("e2e-on-loop-unread").await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    // The spinner holds the loop for its timeout and a 2 s grace: time for
    // the steps below on a slow machine.
    let mut sup = Supervisor::start(&q, &["--workers", "1", "--concurrency", "3", "--timeout", "5"]);
    let who = idle_worker(&sup, &board, &q).await;
    let spinner = Script {
        log_file: Some(log.display().to_string()),
        ..script(Action::Spin, 600_000, &key)
    };
    let spinner = post_to(&board, &q, ON_LOOP, &spinner, 1).await;
    // Its run log's start line is written on the loop, right before the
    // spin: from then on the loop reads nothing.
    wait_started(&sup, &mut Runs::new(&log), &spinner, "the spinner to start").await;
    // As if the worker had registered again just before it froze (a
    // post's hand-off racing its claim).
    register_for_handoff(&board, &q, &who).await;
    let unread = post(&board, &q, &script(Action::Ok, 0, &key), 1).await;
    let handed = board.show(&q, &unread).await.unwrap();
    assert_eq!(
        (handed.state, handed.owner.as_deref()),
        (JobState::Claimed, Some(who.as_str())),
        "the post hands the job to the frozen worker: {handed:?}"
    );
    wait_state(&board, &q, &spinner, JobState::Trashed, 90).await;
    // With its one attempt counted for the frozen worker, it would be
    // trashed.
    wait_until(
        sup.and_log("the unread job to finish"),
        Duration::from_secs(60),
        || async {
            let state = board.show(&q, &unread).await.unwrap().state;
            matches!(state, JobState::Completed | JobState::Trashed)
        },
    )
    .await;
    let info = board.show(&q, &unread).await.unwrap();
    assert_eq!(
        (info.state, info.attempts),
        (JobState::Completed, 0),
        "no attempt counted on the unread job: {info:?}"
    );
    let events: Vec<String> = board
        .history(&q, &unread)
        .await
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        !events.iter().any(|e| e == "failed"),
        "no failure recorded on the unread job: {events:?}"
    );
    assert_eq!(runs(&board, &key).await.get(unread.as_str()), Some(&1));
    assert!(sup.alive(), "{}", sup.log());
}

/// A job that finished on the handler runtime while the loop was frozen
/// waits for the loop's batched consume, which never comes: the watchdog
/// consumes it before the worker exits, so it does not run again.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_that_finished_while_the_loop_was_frozen_is_consumed_once() {
    let (_serial, board, q, _key) = setup("e2e-on-loop-finished").await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.log");
    let mut runs = Runs::new(&log);
    // The default timeout: the freeze lasts 10 s and a 2 s grace.
    let mut sup = Supervisor::start(&q, &["--workers", "1", "--concurrency", "3"]);
    idle_worker(&sup, &board, &q).await;
    let sleeper = post(&board, &q, &logged(Action::Sleep, 5_000, &log), 1).await;
    wait_started(&sup, &mut runs, &sleeper, "the sleeper to start").await;
    let spinner = post_to(&board, &q, ON_LOOP, &logged(Action::Spin, 600_000, &log), 1).await;
    wait_started(&sup, &mut runs, &spinner, "the spinner to start").await;
    let sleeping = |runs: &Runs| {
        runs.all()
            .iter()
            .any(|r| r.id == sleeper.as_str() && r.end.is_none())
    };
    assert!(
        sleeping(&runs),
        "the sleeper still runs when the loop freezes: {:?}",
        runs.all()
    );
    wait_state(&board, &q, &spinner, JobState::Trashed, 90).await;
    wait_state(&board, &q, &sleeper, JobState::Completed, 60).await;
    runs.poll().unwrap();
    let sleeper_runs: Vec<_> = runs.all().iter().filter(|r| r.id == sleeper.as_str()).collect();
    assert_eq!(sleeper_runs.len(), 1, "the sleeper ran once: {sleeper_runs:?}");
    assert_eq!(
        sleeper_runs[0].end.map(|(_, o)| o),
        Some(RunOutcome::Ok),
        "{sleeper_runs:?}"
    );
    assert!(sup.alive(), "{}", sup.log());
}
