//! Crash recovery through the supervisor's blocking Redis board
//! (`SyncBoard`), which runs the same script as the async one: a crash is
//! blamed on a job alone in its worker, alternately through either board.
//! The rest of crash recovery (suspects, other owners) is in the feature
//! suite (`jobworker_tests::feature_suite::recovery`), which both backends
//! run.

use std::time::Duration;

use jobworker::board::{Recovered, Recovery};
use jobworker::redis::{RedisBoard, RedisOptions, SyncBoard};
use jobworker::{Board, JobState, NewJob};
use jobworker_tests::features::board_url;
use jobworker_tests::unique_queue;

const LONG: Duration = Duration::from_secs(300);

async fn setup(prefix: &str) -> (RedisBoard, SyncBoard, String) {
    let board = RedisBoard::connect(&board_url()).await.unwrap();
    let sync = SyncBoard::connect(RedisOptions::new(board_url())).unwrap();
    (board, sync, unique_queue(prefix))
}

#[tokio::test]
async fn a_lone_job_that_kills_its_worker_three_times_is_a_poison_pill() {
    let (board, mut sync, q) = setup("poison").await;
    let id = board.post(&q, NewJob::new("p").max_attempts(10)).await.unwrap();
    for round in 1..=3u32 {
        let c = board
            .claim(&[&q], "dead-worker", LONG, 1)
            .await
            .unwrap()
            .remove(0);
        assert_eq!(*c.lease.job(), id);
        // The supervisor's blocking board and the async one run one script.
        let reason = "killed by signal 6 (SIGABRT)";
        let Recovered { back, trashed } = if round == 2 {
            board.recover_owner(&q, "dead-worker", reason).await.unwrap()
        } else {
            sync.recover_owner(&q, "dead-worker", reason).unwrap()
        };
        assert_eq!(
            (back, trashed),
            if round < 3 { (1, 0) } else { (0, 1) },
            "round {round}"
        );
    }
    let info = board.show(&q, &id).await.unwrap();
    assert_eq!(info.state, JobState::Trashed);
    let reason = info.reason.unwrap_or_default();
    assert!(
        reason.contains("poison pill") && reason.contains("SIGABRT"),
        "{reason}"
    );
}

/// What a worker exiting on purpose still holds goes back without an
/// attempt, a crash or a suspicion counted; other owners' leases stay.
#[tokio::test]
async fn release_unread_gives_back_an_owners_leases_without_counting() {
    let (board, _sync, q) = setup("release-unread").await;
    let mine = board.post(&q, NewJob::new("a").max_attempts(1)).await.unwrap();
    let also_mine = board.post(&q, NewJob::new("b").max_attempts(1)).await.unwrap();
    let theirs = board.post(&q, NewJob::new("c").max_attempts(1)).await.unwrap();
    let held = board.claim(&[&q], "frozen-worker", LONG, 2).await.unwrap();
    assert_eq!(held.len(), 2);
    let other = board.claim(&[&q], "live-worker", LONG, 1).await.unwrap();
    assert_eq!(*other[0].lease.job(), theirs);
    assert_eq!(board.release_unread(&[&q], "frozen-worker").await.unwrap(), 2);
    for id in [&mine, &also_mine] {
        let info = board.show(&q, id).await.unwrap();
        assert_eq!(
            (info.state, info.attempts, info.owner.as_deref()),
            (JobState::Ready, 0, None),
            "{info:?}"
        );
        let events: Vec<_> = board.history(&q, id).await.unwrap();
        let names: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
        assert_eq!(names, ["posted", "claimed", "abandoned"], "{events:?}");
    }
    // Released, not suspect: each may be claimed with others again.
    let again = board.claim(&[&q], "next-worker", LONG, 2).await.unwrap();
    assert_eq!(again.len(), 2, "{again:?}");
    assert_eq!(
        board.show(&q, &theirs).await.unwrap().owner.as_deref(),
        Some("live-worker")
    );
    assert_eq!(board.release_unread(&[&q], "frozen-worker").await.unwrap(), 0);
}
