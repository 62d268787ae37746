//! Claiming ahead (`--prefetch`) end to end: the real `jobworker` binary
//! against a real Redis. A worker holds up to `--prefetch` leases beyond
//! its running jobs; they are heartbeated, started as slots free up, and
//! given back (not counted) when the worker is quieted or drained, or
//! dropped when their job is cancelled. A worker claims ahead only once
//! its jobs have been short, so each test first runs four quick ones.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;
use jobworker::redis::RedisBoard;
use jobworker::{Board, JobId, JobState, ListFilter, Page};
use jobworker_examples::scripted::Action;
use jobworker_tests::wait_until;

/// The jobs of `q` in state `s`.
async fn in_state(board: &RedisBoard, q: &str, s: JobState) -> HashSet<JobId> {
    let page = Page {
        offset: 0,
        limit: 1000,
    };
    let list = board.list(q, ListFilter::State(s), page).await.unwrap();
    list.into_iter().map(|j| JobId::from(j.id)).collect()
}

/// Posts `n` sleepers and waits until the worker (concurrency 2,
/// prefetch 3) holds five: two running, three claimed ahead. Returns the
/// ids of the running and of the waiting ones.
async fn five_held(
    sup: &Supervisor,
    board: &RedisBoard,
    q: &str,
    key: &str,
    n: usize,
    millis: u64,
) -> (Vec<JobId>, Vec<JobId>) {
    let quick = format!("{key}:quick");
    for _ in 0..4 {
        post(board, q, &script(Action::Ok, 0, &quick), 3).await;
    }
    wait_until(
        sup.and_log("four quick jobs run"),
        Duration::from_secs(30),
        || async { in_state(board, q, JobState::Completed).await.len() == 4 },
    )
    .await;
    for _ in 0..n {
        post(board, q, &script(Action::Sleep, millis, key), 3).await;
    }
    wait_until(
        sup.and_log("five jobs claimed, two of them running"),
        Duration::from_secs(30),
        || async {
            in_state(board, q, JobState::Claimed).await.len() == 5 && runs(board, key).await.len() == 2
        },
    )
    .await;
    let started = runs(board, key).await;
    let (running, ahead): (Vec<JobId>, Vec<JobId>) = in_state(board, q, JobState::Claimed)
        .await
        .into_iter()
        .partition(|id| started.contains_key(id.as_str()));
    (running, ahead)
}

/// Jobs claimed ahead wait longer than their lease (1 s) before they
/// start: the heartbeat keeps them, so each runs once, at its first
/// attempt. A cancelled one never starts.
#[tokio::test(flavor = "multi_thread")]
async fn jobs_claimed_ahead_keep_their_leases_and_run_once() {
    let (_serial, board, q, key) = setup("e2e-prefetch").await;
    let mut sup = Supervisor::start(
        &q,
        &[
            "--workers",
            "1",
            "--concurrency",
            "2",
            "--prefetch",
            "3",
            "--expiry",
            "1",
        ],
    );
    let (_, ahead) = five_held(&sup, &board, &q, &key, 8, 2500).await;
    assert_eq!(ahead.len(), 3, "three claimed ahead");
    let cancelled = ahead[0].clone();
    board
        .cancel(&q, std::slice::from_ref(&cancelled), false)
        .await
        .unwrap();
    wait_until("seven jobs completed", Duration::from_secs(60), || async {
        in_state(&board, &q, JobState::Completed).await.len() == 4 + 7
    })
    .await;
    assert_eq!(state(&board, &q, &cancelled).await, JobState::Cancelled);
    let runs = runs(&board, &key).await;
    assert_eq!(runs.len(), 7, "every job but the cancelled one ran: {runs:?}");
    assert!(runs.values().all(|&n| n == 1), "a job ran twice: {runs:?}");
    for id in in_state(&board, &q, JobState::Completed).await {
        let info = board.show(&q, &id).await.unwrap();
        assert_eq!(info.attempts, 0, "job {id} lost its lease while claimed ahead");
    }
    sup.stop_cleanly(Duration::from_secs(30));
    assert!(!sup.log().contains("lease lost"), "{}", sup.log());
}

/// TSTP gives the jobs claimed ahead back at once (the running ones
/// finish); after TERM nothing is held, and nothing was counted.
#[tokio::test(flavor = "multi_thread")]
async fn quiet_and_drain_give_jobs_claimed_ahead_back_uncounted() {
    let (_serial, board, q, key) = setup("e2e-prefetch-quiet").await;
    let mut sup = Supervisor::start(&q, &["--workers", "1", "--concurrency", "2", "--prefetch", "3"]);
    let (running, ahead) = five_held(&sup, &board, &q, &key, 5, 3000).await;
    sup.signal(libc::SIGTSTP);
    wait_until(
        "the jobs claimed ahead given back",
        Duration::from_secs(20),
        || async { in_state(&board, &q, JobState::Ready).await == ahead.iter().cloned().collect() },
    )
    .await;
    for id in &running {
        wait_state(&board, &q, id, JobState::Completed, 30).await;
    }
    sup.stop_cleanly(Duration::from_secs(30));
    assert!(in_state(&board, &q, JobState::Claimed).await.is_empty());
    let again = claim_uncounted(&board, &q, 10).await;
    assert_eq!(again, ahead.into_iter().collect(), "{}", sup.log());
    assert_eq!(runs(&board, &key).await.len(), 2, "only the running jobs ran");
}

/// A worker whose jobs are long claims nothing ahead: a job waiting behind
/// a long one in one worker could run at once in another.
#[tokio::test(flavor = "multi_thread")]
async fn long_jobs_are_not_claimed_ahead() {
    let (_serial, board, q, key) = setup("e2e-prefetch-long").await;
    let mut sup = Supervisor::start(&q, &["--workers", "1", "--concurrency", "2", "--prefetch", "3"]);
    let first = post(&board, &q, &script(Action::Sleep, 300, &key), 3).await;
    wait_state(&board, &q, &first, JobState::Completed, 30).await;
    for _ in 0..5 {
        post(&board, &q, &script(Action::Sleep, 60_000, &key), 3).await;
    }
    wait_until("two long jobs running", Duration::from_secs(30), || async {
        runs(&board, &key).await.len() == 3
    })
    .await;
    // Kept: what is tested is that time passes without a claim ahead.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(
        in_state(&board, &q, JobState::Claimed).await.len(),
        2,
        "{}",
        sup.log()
    );
    assert_eq!(in_state(&board, &q, JobState::Ready).await.len(), 3);
    sup.signal(libc::SIGQUIT);
    sup.wait_exit(Duration::from_secs(30));
}
