//! Crash recovery through the supervisor's blocking Redis board
//! (`SyncBoard`), which runs the same script as the async one: a crash is
//! blamed on a job alone in its worker, alternately through either board;
//! an owner's leases are found however many others the queue holds, and
//! on a cluster.
//! The rest of crash recovery (suspects, other owners) is in the feature
//! suite (`jobworker_tests::feature_suite::recovery`), which both backends
//! run.

use std::time::Duration;

use jobworker::board::{Admin, Recovered, Recovery};
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

/// Leases of the index that sort before a dead worker's, more than the
/// 10,000 the first version of the script looked at.
const CROWD: usize = 10_050;

/// Fills `q` with [`CROWD`] jobs leased to `busy-worker` and two more
/// leased to `owner` with later deadlines, so that the owner's leases sort
/// after the crowd's in the lease index; returns the owner's two job ids.
async fn behind_a_crowd(board: &RedisBoard, q: &str, owner: &str) -> Vec<jobworker::JobId> {
    let crowd: Vec<NewJob> = (0..CROWD).map(|_| NewJob::new("crowd")).collect();
    for posted in board.post_many(q, &crowd).await.unwrap() {
        posted.unwrap();
    }
    let mut taken = 0;
    while taken < CROWD {
        let n = (CROWD - taken).min(jobworker::board::MAX_CLAIM_COUNT);
        taken += board.claim(&[q], "busy-worker", LONG, n).await.unwrap().len();
    }
    for id in ["last-1", "last-2"] {
        board.post(q, NewJob::new("mine").id(id)).await.unwrap();
    }
    let mine = board.claim(&[q], owner, LONG * 2, 2).await.unwrap();
    mine.iter().map(|c| c.lease.job().clone()).collect()
}

/// A dead worker's leases are all given back however many other leases
/// the queue holds, through either board.
#[tokio::test]
async fn recovery_finds_an_owners_leases_behind_ten_thousand_others() {
    let (board, mut sync, q) = setup("crowd-recover").await;
    let mine = behind_a_crowd(&board, &q, "dead-worker").await;
    assert_eq!(mine.len(), 2);
    let reason = "killed by signal 9 (SIGKILL)";
    let got = sync.recover_owner(&q, "dead-worker", reason).unwrap();
    assert_eq!((got.back, got.trashed), (2, 0));
    for id in &mine {
        let info = board.show(&q, id).await.unwrap();
        assert_eq!((info.state, info.attempts), (JobState::Ready, 1), "{info:?}");
    }
    let counts = board.counts(std::slice::from_ref(&q)).await.unwrap();
    assert_eq!(counts.claimed, CROWD, "the crowd's leases stay");
    // Each is a suspect now, handed out alone: claimed again by a worker
    // that dies too, the async board finds it.
    let again = board.claim(&[&q], "dead-again", LONG * 3, 2).await.unwrap();
    assert_eq!(again.len(), 1, "{again:?}");
    let got = board.recover_owner(&q, "dead-again", reason).await.unwrap();
    assert_eq!((got.back, got.trashed), (1, 0));
    let info = board.show(&q, again[0].lease.job()).await.unwrap();
    assert_eq!((info.state, info.attempts), (JobState::Ready, 2), "{info:?}");
}

/// What a replaced worker holds unread goes back however many other
/// leases the queue holds.
#[tokio::test]
async fn release_unread_finds_an_owners_leases_behind_ten_thousand_others() {
    let (board, _sync, q) = setup("crowd-release").await;
    let mine = behind_a_crowd(&board, &q, "frozen-worker").await;
    assert_eq!(board.release_unread(&[&q], "frozen-worker").await.unwrap(), 2);
    for id in &mine {
        let info = board.show(&q, id).await.unwrap();
        assert_eq!((info.state, info.attempts), (JobState::Ready, 0), "{info:?}");
    }
}

/// On a cluster the paged search runs on the queue's own master, through
/// either board.
#[tokio::test]
async fn recovery_on_a_cluster_gives_back_an_owners_leases() {
    let url = jobworker_tests::shared_cluster().url();
    let board = RedisBoard::connect(&url).await.unwrap();
    let mut sync = SyncBoard::connect(RedisOptions::new(url)).unwrap();
    let q = unique_queue("cluster-recover");
    for _ in 0..3 {
        board.post(&q, NewJob::new("c")).await.unwrap();
    }
    assert_eq!(board.claim(&[&q], "dead-worker", LONG, 2).await.unwrap().len(), 2);
    assert_eq!(board.claim(&[&q], "live-worker", LONG, 1).await.unwrap().len(), 1);
    let got = sync.recover_owner(&q, "dead-worker", "killed").unwrap();
    assert_eq!((got.back, got.trashed), (2, 0));
    // Both are suspects now, each handed out alone.
    assert_eq!(
        board.claim(&[&q], "frozen-worker", LONG, 2).await.unwrap().len(),
        1
    );
    assert_eq!(board.release_unread(&[&q], "frozen-worker").await.unwrap(), 1);
    let counts = board.counts(std::slice::from_ref(&q)).await.unwrap();
    assert_eq!(counts.claimed, 1, "live-worker's lease stays");
}
