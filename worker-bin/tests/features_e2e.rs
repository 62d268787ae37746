//! qless-style features end to end, on the real `jobworker` binary:
//! recurring jobs raced by several workers, pipelines across queues (and
//! one into its own queue, refused),
//! cancelling a running job, and pause/resume while workers run.

mod common;

use std::time::{Duration, Instant};

use common::*;
use jobworker::recurring::RecurringJob;
use jobworker::schedule::Rule;
use jobworker::{Board, JobState, ListFilter, Page};
use jobworker_examples::scripted::{Action, Script};
use jobworker_tests::wait_until;

/// Must-show: four workers racing over 60 one-second slots post and run
/// exactly one job per slot.
#[tokio::test(flavor = "multi_thread")]
async fn four_workers_race_sixty_one_second_slots_into_exactly_sixty_runs() {
    let (_serial, board, q, key) = setup("e2e-recur").await;
    let sup = Supervisor::start(&q, &["--workers", "4", "--interval", "30"]);
    let tick = script(Action::Ok, 0, &key);
    let template = RecurringJob::new("scripted", Rule::every(Duration::from_secs(1)).unwrap())
        .args(&tick)
        .unwrap()
        .backlog(100);
    let started = Instant::now();
    let id = board.recur(&q, template).await.unwrap();
    let spawned = || async { board.recurring(&q).await.unwrap()[0].runs };
    wait_until("60 runs spawned", Duration::from_secs(90), || async {
        spawned().await >= 60
    })
    .await;
    let elapsed = started.elapsed();
    board.unrecur(&q, &id).await.unwrap();
    wait_until("60 runs handled", Duration::from_secs(30), || async {
        runs(&board, &key).await.len() >= 60
    })
    .await;
    // Counted once nothing is live: a job consumed between reading the
    // completed list and the live one would be in neither.
    wait_until("the queue to drain", Duration::from_secs(30), || async {
        live_count(&board, &q).await == 0
    })
    .await;
    let runs_posted = completed_count(&board, &q).await;
    let handled = runs(&board, &key).await;
    println!(
        "60 slots of 1 s spawned in {elapsed:?} by 4 racing workers; {} jobs ran",
        handled.len()
    );
    // Slots are t0, t0+1s, …, t0+59s: the 60th cannot be posted before 59 s
    // have passed unless a slot was posted twice.
    assert!(
        elapsed >= Duration::from_millis(58_500),
        "60 runs after only {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_secs(75),
        "workers fell behind: {elapsed:?}"
    );
    assert_eq!(runs_posted, 60, "jobs posted for 60 slots");
    assert_eq!(handled.len(), 60, "each slot's job ran: {handled:?}");
    assert!(handled.values().all(|&n| n == 1), "a run ran twice: {handled:?}");
    drop(sup);
}

const ALL: Page = Page {
    offset: 0,
    limit: 10_000,
};

/// Jobs of `q` in its listings (ready, scheduled, claimed).
async fn live_count(board: &jobworker::redis::RedisBoard, q: &str) -> usize {
    board.list(q, ListFilter::Live, ALL).await.unwrap().len()
}

/// Jobs of `q` in its completed history.
async fn completed_count(board: &jobworker::redis::RedisBoard, q: &str) -> usize {
    let done = ListFilter::State(JobState::Completed);
    board.list(q, done, ALL).await.unwrap().len()
}

/// A handler that calls `complete_into` moves its job to the next queue
/// once it succeeds: the same id runs in both queues, in order.
#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_step_completes_into_the_next_queue() {
    let (_serial, board, q, key) = setup("e2e-pipe").await;
    let next_q = format!("{q}-next");
    let step = Script {
        next_queue: Some(next_q.clone()),
        ..script(Action::Ok, 0, &key)
    };
    let id = post(&board, &q, &step, 3).await;
    let sup = Supervisor::start(&format!("{q},{next_q}"), &["--workers", "1"]);
    wait_until(
        sup.and_log("the next step to complete"),
        Duration::from_secs(30),
        || async { board.state(&next_q, &id).await.ok() == Some(JobState::Completed) },
    )
    .await;
    assert_eq!(state(&board, &q, &id).await, JobState::Completed);
    assert_eq!(
        runs(&board, &key).await.get(id.as_str()),
        Some(&2),
        "ran once per queue"
    );
    let first = board.history(&q, &id).await.unwrap();
    let second = board.history(&next_q, &id).await.unwrap();
    let at = |h: &[serde_json::Value], event: &str| {
        h.iter()
            .find(|e| e["event"] == event)
            .and_then(|e| e["at"].as_i64())
            .unwrap()
    };
    assert!(
        at(&second, "posted") <= at(&first, "consumed"),
        "next step posted before the first is consumed"
    );
    drop(sup);
}

/// A step that names its own queue as the next one would post the job
/// itself: the worker trashes it, saying so, instead of dropping the step.
#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_step_into_its_own_queue_is_trashed_not_dropped() {
    let (_serial, board, q, key) = setup("e2e-pipe-own").await;
    let step = Script {
        next_queue: Some(q.clone()),
        ..script(Action::Ok, 0, &key)
    };
    let id = post(&board, &q, &step, 3).await;
    let sup = Supervisor::start(&q, &["--workers", "1"]);
    wait_until(
        sup.and_log("the step trashed"),
        Duration::from_secs(30),
        || async { board.state(&q, &id).await.ok() == Some(JobState::Trashed) },
    )
    .await;
    let reason = board.show(&q, &id).await.unwrap().reason.unwrap_or_default();
    assert!(
        reason.starts_with("fatal: complete_into names the job's own queue"),
        "{reason}"
    );
    drop(sup);
}

/// Cancelling a running job stops its handler at once and the job never
/// runs again. The worker may hear of the cancel on pub/sub or from a
/// refused extend (a cancel that came before its subscription); both name
/// the cancel, and the test asserts the outcome, not which path won: the
/// one slot is free again (a 60 s handler was stopped), the job is
/// cancelled, it ran once, and its history names the cancel and no lost
/// lease. "At once" means before the heartbeat (every 10 s with a 30 s
/// lease) could have stopped it.
#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_running_job_stops_its_handler() {
    let (_serial, board, q, key) = setup("e2e-cancel").await;
    let sup = Supervisor::start(&q, &["--workers", "1", "--expiry", "30"]);
    let id = post(&board, &q, &script(Action::Sleep, 60_000, &key), 3).await;
    wait_state(&board, &q, &id, JobState::Claimed, 30).await;
    let cancelled_at = Instant::now();
    board.cancel(&q, std::slice::from_ref(&id), false).await.unwrap();
    // The only slot is free again: the next job runs.
    let next = post(&board, &q, &script(Action::Ok, 0, &key), 3).await;
    wait_state(&board, &q, &next, JobState::Completed, 30).await;
    let stopped_in = cancelled_at.elapsed();
    println!("the cancelled handler's slot ran the next job {stopped_in:?} after the cancel");
    assert!(
        stopped_in < Duration::from_secs(9),
        "the handler was stopped only after {stopped_in:?} (by a heartbeat, not the cancel); log:\n{}",
        sup.log()
    );
    assert_eq!(state(&board, &q, &id).await, JobState::Cancelled);
    let ran = runs(&board, &key).await.get(id.as_str()).copied().unwrap_or(0);
    assert!(ran <= 1, "the cancelled job ran {ran} times");
    let events: Vec<String> = board
        .history(&q, &id)
        .await
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("").to_owned())
        .collect();
    assert!(events.contains(&"cancelled".to_owned()), "{events:?}");
    assert!(!events.contains(&"lease_lost".to_owned()), "{events:?}");
    drop(sup);
}

/// Pausing a queue stops workers from taking its jobs; resuming wakes them.
#[tokio::test(flavor = "multi_thread")]
async fn paused_queue_is_not_served_until_resumed() {
    let (_serial, board, q, key) = setup("e2e-pause").await;
    board.pause(&q).await.unwrap();
    let sup = Supervisor::start(&q, &["--workers", "1", "--interval", "30"]);
    let id = post(&board, &q, &script(Action::Ok, 0, &key), 3).await;
    // Kept: what is tested is that time passes without a claim.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        state(&board, &q, &id).await,
        JobState::Ready,
        "a paused queue's job was taken"
    );
    let resumed = Instant::now();
    board.resume(&q).await.unwrap();
    wait_state(&board, &q, &id, JobState::Completed, 20).await;
    // Woken, not found by the next poll (30 s away).
    assert!(
        resumed.elapsed() < Duration::from_secs(15),
        "resume did not wake the idle worker"
    );
    drop(sup);
}
